"""Existing Harbor tasks run unchanged (issue 11): one test per item, on the fixtures in tests/fixtures/harbor/."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hrbench.envs.base import SandboxError
from hrbench.envs.local import LocalBackend
from hrbench.harness.journal import TrialJournal
from hrbench.harness.records import StageOutcome, TrialRecord, records_table
from hrbench.tasks.audit import KEY_NOT_APPLICABLE, audit_task, diagnose
from hrbench.tasks.harbor import (
    RewardError,
    continues_after,
    meets_min_reward,
    parse_reward_json,
    primary_reward,
    trial_reward,
)
from hrbench.tasks.loader import load_paths, load_task

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "harbor"
BROKEN = FIXTURES / "broken"


@pytest.fixture
def backend(tmp_path: Path) -> LocalBackend:
    return LocalBackend(tmp_path / "cache")


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipelines.cli", *args], capture_output=True, text=True, check=False)


# -- 1. the task model --------------------------------------------------------------------------------

def test_schema_10_without_task_table_and_11_with_org_name_load():
    greeter, ledger = load_task(FIXTURES / "greeter"), load_task(FIXTURES / "ledger")
    assert (greeter.name, greeter.schema_version) == ("greeter", "1.0")
    assert (ledger.name, ledger.slug, ledger.schema_version) == ("acme/ledger", "acme__ledger", "1.1")
    status = {k.key: k.status for k in ledger.support}
    assert status["steps[].min_reward"] == "honoured" and status["task.authors"] == "ignored"
    assert {k.key: k.status for k in greeter.support}["environment.allow_internet"] == "ignored"


def test_docs_keys_table_is_the_support_table():
    # docs/tasks.md says its table is generated from SUPPORT: every row, verbatim, and no other key rows
    from hrbench.tasks.harbor import SUPPORT

    doc = (Path(__file__).resolve().parents[2] / "docs" / "tasks.md").read_text()
    rows = [line for line in doc.splitlines() if line.startswith("| `")]
    assert rows == [f"| `{key}` | {status} | {how} |" for key, (status, how) in SUPPORT.items()]


def test_unknown_keys_are_reported_by_name_not_refused(tmp_path: Path):
    task = tmp_path / "t"
    shutil.copytree(FIXTURES / "greeter", task)
    (task / "task.toml").write_text((task / "task.toml").read_text() + "mcp_servers = []\n"
                                    .replace("mcp_servers", "[environment.future_key]\nx"))
    rows = {k.key: k for k in load_task(task).support}
    assert rows["environment.future_key.x"].status == "unsupported"


def test_tasks_list_shows_keys_and_reports_one_bad_task_while_listing_the_rest():
    result = _cli("tasks", "list", str(FIXTURES / "ledger"), str(BROKEN))
    assert result.returncode == 1
    assert "acme/ledger:" in result.stdout and "acme/silent:" in result.stdout
    assert "honoured    steps[].healthcheck: run after the step's setup.sh" in result.stdout
    assert "not-toml/task.toml: malformed TOML" in result.stderr


# -- 2. faithful execution on local ------------------------------------------------------------------

def test_solution_runs_from_solution_dir_with_helpers_and_writes_to_output_persist(backend: LocalBackend):
    task = load_task(FIXTURES / "greeter")
    env = backend.start(task, 0)
    try:
        run = env.run_solution(task.stages[0])
        assert run.exit_code == 0, run.output
        assert env.exec("cat /output/greeting.txt", 10).output.strip() == "hello, harbor"
        check = env.verify(task.stages[0])
        assert check.passed, check.output  # pytest via `python -m pytest`, [verifier.env] injected
        assert env.exec("ls /solution 2>&1", 10).exit_code != 0  # the agent never sees /solution
        # [verifier.env] is the verifier's alone: the agent cannot read the expected answer from its env
        assert env.exec('echo "[${EXPECTED_GREETING-}]"', 10).output.strip() == "[]"
    finally:
        env.close()


def test_writes_outside_workdir_and_persisted_paths_are_refused_by_name(backend: LocalBackend):
    env = backend.start(load_task(FIXTURES / "greeter"), 0)
    try:
        result = env.exec("echo x > /srv/state.txt", 10)
        assert result.exit_code != 0
        assert diagnose(result.output).startswith("write outside WORKDIR refused: /srv/state.txt")
    finally:
        env.close()


def test_step_workdir_files_setup_sh_and_env_are_in_place_before_the_turn(backend: LocalBackend):
    task = load_task(FIXTURES / "ledger")
    env = backend.start(task, 0)
    try:
        out = env.exec('cat /app/config.txt; ls -A /app; echo "cur=$LEDGER_CURRENCY"', 10).output
        assert "opening=100" in out and ".ready" in out and "setup.sh" not in out and "cur=EUR" in out
    finally:
        env.close()


def test_healthcheck_failing_is_refused_and_passing_lets_the_stage_start(backend: LocalBackend, tmp_path: Path):
    with pytest.raises(SandboxError, match=r"\[environment.healthcheck\] failed 2 time\(s\): `false` exited 1"):
        backend.start(load_task(BROKEN / "unhealthy"), 0)
    task = tmp_path / "ledger"
    shutil.copytree(FIXTURES / "ledger", task)
    (task / "steps" / "open" / "workdir" / "setup.sh").write_text("true\n")  # no /app/.ready: step check fails
    with pytest.raises(SandboxError, match=r"\[steps.healthcheck\] of step 'open' failed"):
        backend.start(load_task(task), 0)
    env = backend.start(load_task(FIXTURES / "ledger"), 0)  # both healthchecks pass: the stage starts
    try:
        assert env.exec("test -f /app/.ready && test -f /app/accounts.csv", 10).exit_code == 0
    finally:
        env.close()


def test_artifacts_collected_after_verification(backend: LocalBackend, tmp_path: Path):
    task = load_task(FIXTURES / "ledger")
    env = backend.start(task, 0)
    env.artifacts_dir = tmp_path / "artifacts"
    try:
        env.run_solution(task.stages[0])
        check = env.verify(task.stages[0])
    finally:
        env.close()
    assert check.artifacts == ["/logs/artifacts", "/app/ledger.txt"]
    assert (tmp_path / "artifacts" / "open" / "files" / "logs" / "artifacts" / "open.log").read_text() \
        == "opened with 100\n"
    assert (tmp_path / "artifacts" / "open" / "files" / "app" / "ledger.txt").read_text() == "EUR 100\n"


def test_min_reward_gate_and_reward_strategies():
    gate = (("balance", 1.0),)
    assert continues_after(None, True, None)
    assert not continues_after(None, False, {"reward": 0.9})  # no gate: stop at the first failure
    assert continues_after(gate, False, {"reward": 0.0, "balance": 1.0})  # the gate is met: go on
    assert not continues_after(gate, False, {"reward": 1.0})  # gated key missing: -inf
    assert not continues_after(0.5, False, None)  # a verifier error: -inf
    assert meets_min_reward(0.5, {"reward": 0.5})
    assert trial_reward("mean", [1.0, 0.0, None]) == 0.5 and trial_reward(None, [1.0, 0.5]) == 0.75
    assert trial_reward("final", [1.0, 0.25]) == 0.25 and trial_reward("final", []) is None


# -- 3. rewards as Harbor defines them ---------------------------------------------------------------

def test_reward_json_uses_reward_when_present_else_the_only_key(backend: LocalBackend):
    assert primary_reward(parse_reward_json({"reward": 0.333, "tests": 3, "passed": 1})) == 0.333
    assert primary_reward({"closed": 1.0}) == 1.0
    with pytest.raises(RewardError, match="no `reward`"):
        primary_reward({"a": 1.0, "b": 1.0})
    task = load_task(FIXTURES / "ledger")
    env = backend.start(task, 0)
    try:
        env.run_solution(task.stages[0])
        check = env.verify(task.stages[0])
    finally:
        env.close()
    assert check.passed and check.rewards == {"reward": 1.0, "balance": 1.0, "lines_checked": 3.0}


def test_sub_rewards_are_columns_of_the_trial_rows():
    outcome = StageOutcome(stage="open", passed=True, reward=1.0, turns=1, wall_s=1, agent_s=1, verifier_s=0,
                           exit_reason="passed", rewards={"reward": 1.0, "lines_checked": 3.0})
    row = TrialRecord(prereg_sha256="0" * 64, agent="a", condition="c", protocol="p", task="acme/ledger",
                      kind="checkpoint", stage="open", trial_index=0, trial_key="k", passed=True, stages_passed=1,
                      stopped_stage=None, turns=1, wall_s=1, agent_s=1, verifier_s=0, exit_reason="passed",
                      stage_outcomes_json=json.dumps([outcome.model_dump()]),
                      rewards_json=json.dumps({"open": outcome.rewards}))
    table = records_table([row])
    assert table.loc[0, "reward.open.lines_checked"] == 3.0


def test_missing_reward_file_is_a_verifier_error_retried_on_resume(backend: LocalBackend, tmp_path: Path):
    task = load_task(BROKEN / "silent")
    env = backend.start(task, 0)
    try:
        env.run_solution(task.stages[0])
        check = env.verify(task.stages[0])
    finally:
        env.close()
    assert not check.passed and check.reward == 0.0 and "missing reward file" in check.error
    record = TrialRecord(prereg_sha256="0" * 64, agent="a", condition="c", protocol="p", task=task.name,
                         kind="checkpoint", stage="main", trial_index=0, trial_key="k", passed=False, stages_passed=0,
                         stopped_stage="main", turns=1, wall_s=1, agent_s=1, verifier_s=0,
                         exit_reason="verifier_error", stage_outcomes_json="[]")
    journal = TrialJournal(tmp_path / "j.jsonl")
    journal.append(record)
    assert journal.load() == {}  # not a result: the trial runs again


# -- 4. verifier tooling offline ---------------------------------------------------------------------

def test_verifiers_have_python_and_pytest_without_the_network(backend: LocalBackend, tmp_path: Path):
    task = tmp_path / "t"
    shutil.copytree(FIXTURES / "greeter", task)
    (task / "tests" / "test.sh").write_text(
        "python --version && python -m pytest --version && cd /app && python -c 'import helper' "
        "&& echo 1 > /logs/verifier/reward.txt\n")
    loaded = load_task(task)
    env = backend.start(loaded, 0)
    try:
        env.exec("echo 'x = 1' > /app/helper.py", 10)  # imported from WORKDIR: no PYTHONSAFEPATH here
        check = env.verify(loaded.stages[0])
    finally:
        env.close()
    assert check.passed, check.output


# -- 5. key step optional, partial credit explained; 6. causes named ---------------------------------

def test_harbor_tasks_without_hrbench_metadata_pass_the_audit(backend: LocalBackend):
    for name in ("greeter", "ledger", "cumulative"):
        rows = audit_task(load_task(FIXTURES / name), backend)
        assert all(r.ok for r in rows), [r.problem for r in rows]
        assert all(r.key_check == KEY_NOT_APPLICABLE and r.reference_reward == 1.0 for r in rows)
        if name == "cumulative":
            assert "partial credit: doing nothing scores 0.5" in rows[1].notes[0]


@pytest.mark.parametrize("task, expected", [
    ("silent", "exit reason verifier_error; missing reward file"),
    ("unset-env", "diagnosis: env var unset: API_TOKEN"),
    ("multikey", "reward.json has 2 keys (a, b) and no `reward`"),
])
def test_audit_names_the_cause(backend: LocalBackend, task: str, expected: str):
    (row,) = audit_task(load_task(BROKEN / task), backend)
    assert not row.ok and expected in row.problem


def test_diagnoses_of_common_causes():
    assert diagnose("curl: (6) Could not resolve host: pypi.org").startswith("network needed")
    assert diagnose("/tests/test.sh: line 3: jq: command not found") .startswith("command not found: jq")
    assert diagnose("/usr/bin/python3: No module named pytest").startswith("pytest missing")


# -- 7. CLI ------------------------------------------------------------------------------------------

def test_local_refuses_a_task_whose_image_needs_what_the_host_lacks(backend: LocalBackend):
    task = load_task(BROKEN / "needs-cowsay")
    with pytest.raises(SandboxError, match=r"needs the docker backend \(needs packages not on this host: cowsay\)"):
        backend.start(task, 0)


def test_load_paths_takes_task_dirs_and_registries_alike():
    tasks, errors = load_paths([FIXTURES / "greeter", BROKEN])
    assert "greeter" in [t.name for t in tasks] and "acme/silent" in [t.name for t in tasks]
    assert [p.name for p, _ in errors] == ["not-toml"]


def test_audit_cli_prints_messages_verbatim_for_org_names():
    result = _cli("tasks", "audit", str(BROKEN / "silent"))
    assert result.returncode == 1
    assert "FAIL acme/silent (1 stages)" in result.stdout
    assert "key-step check not applicable (no key step marked)" in result.stdout


def test_a_stage_without_a_reward_file_ends_with_exit_reason_verifier_error(backend: LocalBackend):
    from hrbench.agents.oracle import OracleAgent
    from hrbench.harness.history import History
    from hrbench.harness.loop import run_stage
    from hrbench.protocol import Budget

    task = load_task(BROKEN / "silent")
    env = backend.start(task, 0)
    try:
        agent = OracleAgent()
        agent.begin_trial(type("Ctx", (), {"task": task})())
        outcome = run_stage(env, agent, task, task.stages[0], History("full"), Budget(max_turns=3))
    finally:
        env.close()
    assert outcome.exit_reason == "verifier_error" and "missing reward file" in outcome.error
