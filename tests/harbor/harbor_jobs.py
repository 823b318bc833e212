"""Harbor job folders written by the tests in Harbor's documented layout (jobs/<job>/config.json,
result.json, <trial>/result.json with step_results, steps/<name>/agent/trajectory.json)."""

from __future__ import annotations

import json
import shutil
from datetime import datetime, timedelta
from pathlib import Path

import yaml

from hrbench.harbor_io.jobs import harbor_checksum
from hrbench.harness.records import TrialRecord

T0 = datetime(2026, 3, 11, 20, 0, 0)
# a 3-stage chain where Harbor's min_reward gates: `make` lets a failed rollout go on, `double` stops it
GATES = {"make": 'min_reward = 0.0\n', "double": 'min_reward = 0.5\n'}


def gated_chain(registry: Path, source: Path) -> Path:
    """tiny-chain with Harbor min_reward gates, in `registry`."""
    task = registry / "tiny-chain"
    shutil.copytree(source, task)
    toml = task / "task.toml"
    text = toml.read_text()
    for step, gate in GATES.items():
        text = text.replace(f'name = "{step}"\n', f'name = "{step}"\n{gate}')
    toml.write_text(text)
    return task


def step(name: str, reward: float | None, start: datetime, tokens: tuple[int, int] = (0, 0),
         error: str | None = None) -> dict:
    return {
        "step_name": name, "started_at": start.isoformat(), "finished_at": (start + timedelta(seconds=5)).isoformat(),
        "agent_result": {"n_input_tokens": tokens[0], "n_output_tokens": tokens[1], "cost_usd": 0.01},
        "verifier_result": None if reward is None else {"rewards": {"reward": reward}},
        "exception_info": None if error is None else {"exception_type": error, "exception_message": "it broke"},
        "agent_execution": {"started_at": start.isoformat(), "finished_at": (start + timedelta(seconds=3)).isoformat()},
        "verifier": {"started_at": (start + timedelta(seconds=3)).isoformat(),
                     "finished_at": (start + timedelta(seconds=5)).isoformat()},
    }


def trial(task_dir: Path, name: str, agent: str, model: str, start: datetime, steps: list[dict],
          error: str | None = None, checksum: str | None = None) -> dict:
    provider, _, model_name = model.partition("/")
    return {
        "id": f"00000000-0000-0000-0000-{abs(hash(name)) % 10**12:012d}", "task_name": task_dir.name,
        "trial_name": name, "trial_uri": f"file:///jobs/{name}", "task_id": {"path": str(task_dir)},
        "task_checksum": checksum or harbor_checksum(task_dir), "source": None,
        "config": {"agent": {"name": agent, "model_name": model}},
        "agent_info": {"name": agent, "version": "1.0", "model_info": {"name": model_name, "provider": provider}},
        "agent_result": None, "verifier_result": None,
        "exception_info": None if error is None else {"exception_type": error, "exception_message": "the sandbox died"},
        "started_at": start.isoformat(), "finished_at": (start + timedelta(seconds=30)).isoformat(),
        "step_results": steps,
    }


def write_job(job: Path, trials: list[tuple[str, dict]]) -> Path:
    """A job folder: config.json, result.json and one folder per (folder name, trial result)."""
    job.mkdir(parents=True)
    (job / "config.json").write_text(json.dumps({"job_name": job.name, "n_attempts": 1}))
    (job / "result.json").write_text(json.dumps({
        "id": "job", "started_at": T0.isoformat(), "finished_at": (T0 + timedelta(hours=1)).isoformat(),
        "n_total_trials": len(trials), "stats": {"n_trials": len(trials), "n_errors": 0}}))
    for folder, result in trials:
        (job / folder).mkdir()
        (job / folder / "result.json").write_text(json.dumps(result))
        for s in result["step_results"]:
            traj = job / folder / "steps" / s["step_name"] / "agent" / "trajectory.json"
            traj.parent.mkdir(parents=True)
            traj.write_text(json.dumps({"schema_version": "ATIF-v1.4", "session_id": folder, "steps": []}))
    return job


def from_records(task_dir: Path, records: list[TrialRecord], agent: str, model: str, offset: int = 0) -> list[dict]:
    """Harbor trial results with the outcomes of hrbench's own rows (each stage's rewards and tokens)."""
    out = []
    for r in sorted(records, key=lambda r: r.trial_index):
        start = T0 + timedelta(minutes=offset + r.trial_index)
        steps = [step(o["stage"], o["reward"], start, (o["tokens_in"], o["tokens_out"]))
                 for o in json.loads(r.stage_outcomes_json)]
        out.append(trial(task_dir, f"{task_dir.name}__{agent}-{r.trial_index}", agent, model, start, steps))
    return out


def study_file(path: Path, registry: Path, agents: list[dict], imports: list[dict] | None = None,
               trials: dict | None = None) -> Path:
    body = {"name": "harbor-import", "description": "imported Harbor rollouts", "tasks": {"registry": str(registry)},
            "agents": agents, "trials": trials or {"checkpoint": 2, "natural": 4},
            "bootstrap": {"n_boot": 200, "seed": 1}, "concurrency": 2}
    if imports:
        body["imports"] = imports
    path.write_text(yaml.safe_dump(body))
    return path
