"""Verifier audit (DESIGN §3): a task may enter a study only if its verifiers discriminate.

For every stage i, starting from the oracle checkpoint e_{i-1}:
  * the reference solution sigma_i scores 1;
  * doing nothing scores 0 (the paper's "checks of segment s run before its work");
  * sigma_i with its key step removed scores 0;
  * the tamper check: a scripted adversary that does not solve the stage never passes.  It
    (a) plants reward-forging code into every file a verifier might execute (*.py, *.sh, *.env,
        executables, and the files the stage's instruction names; *.sh become executable),
        (b) leaves a background writer in a live agent shell that keeps forging rewards and
        re-planting that code while the verifier runs, and (c) edits the task's original input files in e_0 and replays the
        reference solutions sigma_1..sigma_i over them, so that every file the stage sees agrees
        with the edited inputs but not with the real ones.  (c) only counts when the edit changed
        what sigma_i produced: a stage whose outputs do not depend on the edited files may pass.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import re
import sqlite3
import tarfile
import tempfile
from concurrent.futures import ThreadPoolExecutor

from pydantic import BaseModel

from hrbench.envs.base import ExecResult, SandboxError, VerifierResult
from hrbench.envs.docker import DockerBackend, DockerEnvironment, WorkdirFile
from hrbench.envs.local import LocalBackend, LocalEnvironment
from hrbench.tasks.model import Stage, Task, TaskError

TAMPER_MARK = "hrbench-tamper"
KEY_NOT_APPLICABLE = "not applicable (no key step marked)"


def _lenient(finding: str) -> str:
    """A tamper finding on a Harbor task without [metadata.hrbench]: reported, not failed."""
    return ("integrity (reported, not enforced for a task without [metadata.hrbench]; an agent that games "
            f"verifiers could forge this stage's reward): {finding}")
_CODE_SUFFIXES = (".py", ".sh", ".env", ".bash")
# paths an instruction asks for: `/app/ledger.py`, `tools/x.sh`, `bin/run` is not matched (no suffix)
_NAMED_FILE = re.compile(r"(?<![\w./-])((?:/[\w.-]+)*/?(?:[\w.-]+/)*[\w-]+\.(?:py|sh|env|bash))\b")

# Bash that forges a reward from wherever it runs: reward files in every log directory it can
# reach, the check library's result files, again and again from a detached loop.
_FORGE_FN = r"""
__hrb_forge() {
  for d in /logs/verifier "${HRBENCH_LOGS:-/logs}/verifier"; do
    mkdir -p "$d" 2>/dev/null
    printf '{"reward": 1}\n' >"$d/reward.json" 2>/dev/null
    printf '1\n' >"$d/reward.txt" 2>/dev/null
  done
  for r in /tmp/hrbchecks.* /tmp/.hrbench-private.*/results /logs/.hrbench-private.*/results \
      "${TMPDIR:-/tmp}"/hrbchecks.* "${HRBENCH_LOGS:-/logs}"/.hrbench-private.*/results; do
    [ -f "$r" ] && { sed -i '/^F /d' "$r"; printf 'P forged\n' >>"$r"; }
  done
}
"""
_FORGE_BASH = _FORGE_FN + r"""
__hrb_forge
( for __hrb_i in $(seq 600); do __hrb_forge; sleep 0.1; done ) </dev/null >/dev/null 2>&1 &
"""


# Where a payload that finds itself in the verifier's own view (/tests visible) records the file
# it was planted in: a run outside `untrusted` is a defect even when the forgery loses its race.
UNCONFINED_LOG = ".hrbench-tamper-unconfined"


def _bash_payload(where: str, log: str) -> str:
    return (
        f"# {TAMPER_MARK}\n{{ {_FORGE_BASH}\n}} </dev/null >/dev/null 2>&1\n"
        f'if [ -e /tests/checks.sh ]; then echo "{where}" >>"{log}" 2>/dev/null; '
        f'echo "{TAMPER_MARK}: forging code in {where} ran UNCONFINED" >&2; fi\n'
        f"# {TAMPER_MARK}-end\n"
    )


def _python_payload(where: str, log: str) -> str:
    return (
        f"# {TAMPER_MARK}\n"
        "import os as __hrb_os, subprocess as __hrb_sp, sys as __hrb_sys\n"
        f"__hrb_sp.Popen(['/bin/bash', '-c', {_FORGE_BASH!r}], stdin=__hrb_sp.DEVNULL, stdout=__hrb_sp.DEVNULL,\n"
        "               stderr=__hrb_sp.DEVNULL, start_new_session=True)\n"
        "if __hrb_os.path.exists('/tests/checks.sh'):\n"
        f"    open({log!r}, 'a').write({where!r} + '\\n')\n"
        f"    __hrb_sys.stderr.write('{TAMPER_MARK}: forging code in {where} ran UNCONFINED\\n')\n"
        f"# {TAMPER_MARK}-end\n"
    )


# Runs inside the sandbox, as the agent would: plants the payloads (idempotent, so that the
# background writer can re-apply it).  argv[1]: JSON {"workdir", "named": [paths], "bash", "python"}.
_PLANT_PY = r'''
import json, os, stat, sys
spec = json.loads(sys.argv[1])
mark = spec["mark"]
def payload(kind, where):
    return spec[kind].replace("@WHERE@", where)
def plant(path, create_kind=None):
    try:
        if not os.path.lexists(path):
            if create_kind is None:
                return
            os.makedirs(os.path.dirname(path), exist_ok=True)
            text = ("#!/bin/bash\n" if create_kind == "bash" else "") + payload(create_kind, path)
            with open(path, "w") as f:
                f.write(text)
            os.chmod(path, 0o755)
            return
        if os.path.islink(path) or not os.path.isfile(path):
            return
        with open(path, "rb") as f:
            raw = f.read()
        if mark.encode() in raw or b"\0" in raw[:4096]:
            return
        text = raw.decode("utf-8", "surrogateescape")
        lines = text.splitlines(keepends=True)
        name = os.path.basename(path)
        executable = os.stat(path).st_mode & stat.S_IXUSR
        if name.endswith(".py") or (lines and lines[0].startswith("#!") and "python" in lines[0]):
            at = 1 if lines and lines[0].startswith("#!") else 0
            for i, line in enumerate(lines):
                if line.startswith("from __future__"):
                    at = i + 1
            new = lines[:at] + [payload("python", path)] + lines[at:]
        elif name.endswith(".env"):
            new = lines + (["\n"] if lines and not lines[-1].endswith("\n") else []) + [payload("bash", path)]
        elif name.endswith((".sh", ".bash")) or executable or (lines and lines[0].startswith("#!")):
            at = 1 if lines and lines[0].startswith("#!") else 0
            new = lines[:at] + [payload("bash", path)] + lines[at:]
        else:
            return
        with open(path, "w", encoding="utf-8", errors="surrogateescape") as f:
            f.write("".join(new))
        if name.endswith((".sh", ".bash")):  # so that a verifier can run it as a program
            os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
    except OSError:
        pass
for root, dirs, files in os.walk(spec["workdir"]):
    for f in files:
        plant(os.path.join(root, f))
for p in spec["named"]:
    plant(p, "python" if p.endswith(".py") else "bash")
'''

# Runs inside the sandbox: rewrites the task's original input files (argv[1]: JSON list of paths).
# Text loses its second half (at least 4 lines) and every digit after the first line is shifted;
# gzip and tar.gz members get the same treatment; other binary files stay.
_TAMPER_PY = r'''
import gzip, io, json, re, sys, tarfile
def shift(s):
    return re.sub(r"[0-9]", lambda m: str((int(m.group()) + 1) % 10), s)
def text(t):
    lines = t.splitlines(keepends=True)
    if len(lines) >= 4:
        lines = lines[:(len(lines) + 1) // 2]
    if len(lines) > 1:
        return "".join(lines[:1] + [shift(l) for l in lines[1:]])
    if lines and re.search(r"[0-9]", lines[0]):
        return shift(lines[0])
    return "".join(lines) + "tampered\n"
def data(raw):
    if raw[:2] == b"\x1f\x8b":
        inner = gzip.decompress(raw)
        new = data(inner)
        return None if new is None else gzip.compress(new, mtime=0)
    if len(raw) > 262 and raw[257:262] == b"ustar":
        src, out = tarfile.open(fileobj=io.BytesIO(raw)), io.BytesIO()
        with tarfile.open(fileobj=out, mode="w") as dst:
            for m in src.getmembers():
                if m.isfile():
                    body = src.extractfile(m).read()
                    body = data(body) or body
                    m.size = len(body)
                    dst.addfile(m, io.BytesIO(body))
                else:
                    dst.addfile(m)
        return out.getvalue()
    try:
        return text(raw.decode("utf-8")).encode("utf-8")
    except UnicodeDecodeError:
        return None
done = []
for p in json.loads(sys.argv[1]):
    try:
        with open(p, "rb") as f:
            new = data(f.read())
        if new is not None:
            with open(p, "wb") as f:
                f.write(new)
            done.append(p)
    except (OSError, ValueError, EOFError, tarfile.TarError):
        pass
print("tampered:", " ".join(done))
'''


class StageAudit(BaseModel):
    task: str
    stage: str
    reference_reward: float | None
    nothing_reward: float | None
    key_removed_reward: float | None
    forged_reward: float | None = None  # tamper (a) + (b): planted forging code and a background writer
    edited_inputs_reward: float | None = None  # tamper (c): sigma_i over edited original inputs
    ok: bool
    problem: str | None = None
    key_check: str = KEY_NOT_APPLICABLE  # "ok", "failed", or "not applicable (no key step marked)"
    notes: list[str] = []  # explained, not failures (e.g. partial credit of a cumulative reward)


def _tail(result: VerifierResult, n: int = 600) -> str:
    text = result.output.strip()
    return ("..." + text[-n:]) if len(text) > n else text


def _quote(text: str) -> str:
    """A command-line argument for bash, single-quoted."""
    return "'" + text.replace("'", "'\\''") + "'"


def _digest(file: WorkdirFile) -> str:
    """Content digest that ignores what a re-run changes anyway (gzip/tar headers, sqlite pages)."""
    if file.data is None:
        return f"link:{file.link}"
    data = file.data
    try:
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
        if len(data) > 262 and data[257:262] == b"ustar":
            with tarfile.open(fileobj=io.BytesIO(data)) as tar:
                members = sorted(
                    (m.name.removeprefix("./"), hashlib.sha256(tar.extractfile(m).read()).hexdigest() if m.isfile() else m.type.decode())
                    for m in tar.getmembers()
                )
            return "tar:" + hashlib.sha256(json.dumps(members).encode()).hexdigest()
        if data[:16] == b"SQLite format 3\x00":
            with tempfile.NamedTemporaryFile(suffix=".db") as tmp:
                tmp.write(data)
                tmp.flush()
                conn = sqlite3.connect(tmp.name)
                try:
                    dump = "\n".join(conn.iterdump())
                finally:
                    conn.close()
            return "sqlite:" + hashlib.sha256(dump.encode()).hexdigest()
    except (OSError, EOFError, tarfile.TarError, sqlite3.Error, ValueError):
        pass
    return hashlib.sha256(data).hexdigest()


def _files(env: LocalEnvironment | DockerEnvironment) -> dict[str, WorkdirFile]:
    """The environment's workdir files (and persisted paths) by relative path, read without following
    symlinks: from the trial directory on local, through the Docker API on docker."""
    return env.workdir_files()


def _snapshot(files: dict[str, WorkdirFile]) -> dict[str, str]:
    return {rel: _digest(file) for rel, file in files.items()}


def _is_code(rel: str, file: WorkdirFile) -> bool:
    return rel.endswith(_CODE_SUFFIXES) or bool(file.mode & 0o111) or (file.data or b"")[:2] == b"#!"


def _original_inputs(files: dict[str, WorkdirFile]) -> list[str]:
    """The data files of e_0 (not code, not symlinks), relative to the workdir."""
    return sorted(rel for rel, file in files.items() if file.data is not None and not _is_code(rel, file))


def _named_files(task: Task, stage: Stage) -> list[str]:
    """Absolute paths of code files the stage's instruction names (the adversary creates them)."""
    named = []
    for match in _NAMED_FILE.findall(stage.instruction):
        path = match if match.startswith("/") else f"{task.workdir}/{match}"
        if path.startswith(task.workdir + "/") and ".." not in path and path not in named:
            named.append(path)
    return named


def _forge_attack(task: Task, stage: Stage, backend: LocalBackend | DockerBackend, baseline: float = 0.0) -> tuple[float, str | None]:
    """Tamper (a) + (b); returns the reward and, when it is not 0 or agent code ran in the verifier's
    own view, the likely cause."""
    log = f"{task.workdir}/{UNCONFINED_LOG}"
    spec = json.dumps({
        "workdir": task.workdir, "named": _named_files(task, stage), "mark": TAMPER_MARK,
        "bash": _bash_payload("@WHERE@", log), "python": _python_payload("@WHERE@", log),
    })
    writer = (
        f"{_FORGE_FN}\nwhile :; do /usr/bin/python3 /tmp/.hrb-plant.py \"$(cat /tmp/.hrb-spec.json)\"; "
        "__hrb_forge </dev/null >/dev/null 2>&1; sleep 0.2; done"
    )
    env = backend.start(task, stage.index)
    try:
        result, ran = _forge_run(env, stage, spec, writer)
    finally:
        env.close()
    if result.reward <= baseline and not ran:  # baseline: what doing nothing scores (partial credit)
        return result.reward, None
    if ran:
        outcome = "which forged the reward" if result.reward > 0.0 else "which could forge the reward (it lost the race this time)"
        cause = (f"the verifier ran agent code directly ({', '.join(ran)}), {outcome}: run it "
                 "through checks.sh's `untrusted`")
    else:
        cause = ("planted forging code and a background writer passed the stage; does the verifier source "
                 "checks.sh and end with `finish`?")
    return result.reward, f"tamper (a/b): {cause}; verifier output: {_tail(result)!r}"


def _forge_run(env: LocalEnvironment | DockerEnvironment, stage: Stage, spec: str, writer: str) -> tuple[VerifierResult, list[str]]:
    """Plant, start the writer in a live agent shell, verify while it runs; -> result, files run unconfined."""
    shell = env.open_shell()
    try:
        shell.send(
            f"cat > /tmp/.hrb-plant.py <<'HRB_PLANT_EOF'\n{_PLANT_PY}\nHRB_PLANT_EOF\n"
            f"printf '%s' {_quote(spec)} > /tmp/.hrb-spec.json\n"
            "/usr/bin/python3 /tmp/.hrb-plant.py \"$(cat /tmp/.hrb-spec.json)\"\n"
            f"nohup bash -c {_quote(writer)} >/dev/null 2>&1 &\n",
            30,
        )
        shell.read()
        result = env.verify(stage)
    finally:
        shell.close()
    logged = _files(env).get(UNCONFINED_LOG)
    lines = (logged.data or b"").decode(errors="replace").splitlines() if logged is not None else []
    return result, sorted(set(lines) - {""})


class _EditedRun(BaseModel):
    """Tamper (c) for one stage, from the task's single edited chain."""
    result: VerifierResult
    after: dict[str, str]  # workspace digests after sigma_1..sigma_i over the edited inputs


def _edited_chain(task: Task, backend: LocalBackend | DockerBackend) -> tuple[list[str], list[_EditedRun]]:
    """Tamper (c) for every stage at once: edit e_0's inputs, then run sigma_1, verify stage 1,
    run sigma_2, verify stage 2, ... in one workspace (verifiers do not write the workspace)."""
    runs = []
    env = backend.start(task, 0)
    try:
        inputs = _original_inputs(_files(env))
        if not inputs:
            return inputs, []
        paths = [f"{task.workdir}/{rel}" for rel in inputs]
        env.exec(f"/usr/bin/python3 -c {_quote(_TAMPER_PY)} {_quote(json.dumps(paths))}\n", task.agent_timeout_sec)
        for stage in task.stages:
            env.begin_stage(stage)
            env.run_solution(stage)
            runs.append(_EditedRun(result=env.verify(stage), after=_snapshot(_files(env))))
    finally:
        env.close()
    return inputs, runs


def _edit_problem(inputs: list[str], run: _EditedRun, reference: dict[str, str],
                  before: dict[str, str]) -> str | None:
    """The likely cause when the edited chain passed with outputs that differ from the reference's."""
    if run.result.reward < 1.0:
        return None
    outputs = {p for p in set(reference) | set(before) if reference.get(p) != before.get(p)}
    if all(run.after.get(p) == reference.get(p) for p in outputs):
        return None  # the edits did not change what sigma_i produces: passing is right
    edited = ", ".join(inputs[:6]) + (", ..." if len(inputs) > 6 else "")
    return (f"tamper (c): after editing the original inputs ({edited}) and replaying the reference solutions, "
            "their different outputs still pass: the verifier computes expected answers from workspace files; "
            f"compute them from pristine copies shipped in tests/ instead; verifier output: {_tail(run.result)!r}")


class _StageRuns(BaseModel):
    audit: StageAudit
    reference: dict[str, str] = {}  # workspace digests after sigma_i (for tamper c)
    before: dict[str, str] = {}  # digests of e_{i-1}


def _audit_stage(task: Task, stage: Stage, backend: LocalBackend | DockerBackend) -> _StageRuns:
    """Every check of one stage except tamper (c); problems are reported, never raised."""
    ref = nothing = removed = forged = None
    reference: dict[str, str] = {}
    before: dict[str, str] = {}
    problems: list[str] = []
    notes: list[str] = []
    key_check = KEY_NOT_APPLICABLE
    try:
        removed_script = stage.solution_without_key_step() if stage.has_key_step else None
        env = backend.start(task, stage.index)
        try:
            before = _snapshot(_files(env))  # e_{i-1}, as every trial of the stage starts
            ref_run = env.run_solution(stage)
            ref_check = env.verify(stage)
            ref = ref_check.reward
            reference = _snapshot(_files(env))
        finally:
            env.close()
        if ref < 1.0:
            problems.append(f"reference solution scores {ref:g}, not 1: "
                            + explain(ref_check, ref_run, "the reference solution (solution/solve.sh)"))
        env = backend.start(task, stage.index)
        try:
            nothing_run = env.verify(stage)
            nothing = nothing_run.reward
        finally:
            env.close()
        if nothing_run.passed:
            problems.append(f"doing nothing scores {nothing:g}, not 0: the verifier passes before the stage's work; "
                            + explain(nothing_run))
        elif nothing > 0.0:
            notes.append(f"partial credit: doing nothing scores {nothing:g} (a cumulative reward: the verifier credits "
                         "what earlier stages left); the stage still fails, since a stage passes only at reward 1")
        if removed_script is not None:
            env = backend.start(task, stage.index)
            try:
                env.run_solution(stage, removed_script)
                removed_check = env.verify(stage)
                removed = removed_check.reward
            finally:
                env.close()
            key_check = "failed" if removed_check.passed else "ok"
            if removed_check.passed:
                problems.append("removing the key step still passes: the verifier does not test the key step; "
                                + explain(removed_check))
        forged, why = _forge_attack(task, stage, backend, baseline=nothing if not nothing_run.passed else 0.0)
        if why:
            (problems if task.strict_integrity else notes).append(why if task.strict_integrity else _lenient(why))
    except (TaskError, SandboxError) as exc:
        problems.append(str(exc))
    audit = StageAudit(
        task=task.name, stage=stage.name, reference_reward=ref, nothing_reward=nothing,
        key_removed_reward=removed, forged_reward=forged, ok=not problems, problem="; ".join(problems) or None,
        key_check=key_check, notes=notes,
    )
    return _StageRuns(audit=audit, reference=reference, before=before)


# (pattern in the verifier's or solution's output, one-line diagnosis); the first match names the cause
_CAUSES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"Could not resolve host|Temporary failure in name resolution|Network is unreachable|"
                r"Failed to establish a new connection|No matching distribution found|getaddrinfo|"
                r"Name or service not known|Could not connect to|ConnectionError"),
     ("network needed: it tried to reach the network, and sandboxes have none; ship what it downloads in the task "
      "(tests/ or environment/), or use the docker backend with an image that has it")),
    (re.compile(r"No module named '?pytest'?|pytest: command not found"),
     "pytest missing: run scripts/verifier_toolchain.sh (Debian's python3-pytest) on this host"),
    (re.compile(r"(?:^|\s|:)([\w./+-]+): command not found"),
     "command not found: {0}; install it on this host (local runs the host's /usr) or use the docker backend"),
    (re.compile(r"([A-Za-z_][A-Za-z0-9_]*): unbound variable"),
     "env var unset: {0}; declare it in [verifier.env] / [environment.env] of task.toml"),
    (re.compile(r"KeyError: '([A-Z_][A-Z0-9_]*)'"),
     "env var unset (probably): {0}; declare it in [verifier.env] / [environment.env] of task.toml"),
    (re.compile(r"Read-only file system: '?(/[^'\s]*)|line \d+: (/[^\s:]+): (?:Read-only file system|No such file "
                r"or directory)"),
     ("write outside WORKDIR refused: {0}; only WORKDIR, /output, /logs/artifacts and the paths listed in "
      "[metadata.hrbench] persist exist and persist in the sandbox: list it there")),
]


def diagnose(*texts: str) -> str | None:
    """A one-line cause for the common failures, from the output of what ran (None if none is recognised)."""
    for pattern, message in _CAUSES:
        for text in texts:
            match = pattern.search(text)
            if match:
                groups = [g for g in match.groups() if g] if match.groups() else []
                return message.format(*(groups or [""]))
    return None


def explain(check: VerifierResult, run: ExecResult | None = None, what: str = "") -> str:
    """What the audit says about a verification: exit reason, diagnosis, the verifier's own output tail
    (and the tail of what ran before it, when something did)."""
    reason = "verifier_error" if check.error else ("passed" if check.passed else "failed")
    parts = [f"exit reason {reason}"]
    if check.error:
        parts.append(check.error)
    cause = diagnose(check.output, run.output if run is not None else "") or (
        "missing reward file: the verifier must write /logs/verifier/reward.txt or reward.json"
        if check.error and "missing reward file" in check.error else None)
    if cause:
        parts.append(f"diagnosis: {cause}")
    parts.append(f"verifier output (tail): {_tail(check)!r}")
    if run is not None:
        tail = run.output.strip()[-300:]
        parts.append(f"{what or 'solution'} exited {run.exit_code}, output (tail): {tail!r}")
    return "; ".join(parts)


def audit_task(task: Task, backend: LocalBackend | DockerBackend, workers: int | None = None) -> list[StageAudit]:
    """Audit every stage of one task (stages side by side on `workers` threads, default one per
    core); problems are reported, never raised."""
    workers = workers or os.cpu_count() or 2
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="hrbench-audit") as pool:
        chain = pool.submit(_edited_chain, task, backend)
        stages = list(pool.map(lambda stage: _audit_stage(task, stage, backend), task.stages))
        try:
            inputs, edited = chain.result()
            chain_error = None
        except (TaskError, SandboxError) as exc:
            inputs, edited, chain_error = [], [], f"tamper (c): {exc}"
    rows = []
    for i, runs in enumerate(stages):
        audit = runs.audit
        problems = [audit.problem] if audit.problem else []
        if chain_error:
            problems.append(chain_error)
        elif i < len(edited) and runs.reference:
            audit.edited_inputs_reward = edited[i].result.reward
            why = _edit_problem(inputs, edited[i], runs.reference, runs.before)
            if why:
                (problems if task.strict_integrity else audit.notes).append(
                    why if task.strict_integrity else _lenient(why))
        audit.ok = not problems
        audit.problem = "; ".join(problems) or None
        rows.append(audit)
    return rows
