"""Verifier integrity (issue 7, item 3): rewards that code under test cannot forge.

Each attack is planted against a verifier that executes agent code.  It must score 0 against
the hardened verifier (checks.sh, `untrusted`, expected values from pristine copies in tests/),
and — so that these tests can fail — the same attack scores 1 against a naive verifier that runs
the agent's code directly and computes its expectation from the workspace.
"""

from __future__ import annotations

import filecmp
import os
import shutil
import subprocess
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from hrbench.envs.base import CHECK_LIBRARY
from hrbench.envs.local import LocalBackend, bwrap_available
from hrbench.tasks.audit import audit_task
from hrbench.tasks.loader import load_task

pytestmark = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap is required")

REGISTRY = Path(__file__).resolve().parents[1] / "task_registry"
DATA = "".join(f"{n}\n" for n in (4, 8, 15, 16, 23, 42))  # sums to 108

HARDENED = """\
#!/bin/bash
source /tests/checks.sh
# expected value from the pristine copy shipped with the tests; agent code only through `untrusted`
WANT="$(awk '{ s += $1 } END { print s }' /tests/pristine/data.txt)"
cp /tests/pristine/data.txt /tmp/data.txt
expect_eq sum_of_copy "$(untrusted python3 /app/tool.py /tmp/data.txt)" "$WANT" int
expect_eq sum_of_workspace "$(untrusted python3 /app/tool.py /app/data.txt)" "$WANT" int
finish
"""

NAIVE = """\
#!/bin/bash
# runs the agent's tool directly and trusts the workspace's data file
mkdir -p /logs/verifier
want="$(awk '{ s += $1 } END { print s }' /app/data.txt)"
got="$(python3 /app/tool.py /app/data.txt)"
if [ "$got" = "$want" ]; then echo '{"reward": 1}'; else echo '{"reward": 0}'; fi > /logs/verifier/reward.json
"""

# Forging code: a reward.txt (which the reader prefers, as Harbor's does), the check library's result files, and a
# detached loop that keeps doing both for as long as it lives.
FORGER = '''\
import glob, os, subprocess, sys
LOOP = r"""
forge() {
  mkdir -p /logs/verifier 2>/dev/null
  echo '{"reward": 1}' > /logs/verifier/reward.json 2>/dev/null
  echo 1 > /logs/verifier/reward.txt 2>/dev/null
  for r in /logs/.hrbench-private.*/results; do [ -f "$r" ] && { sed -i '/^F /d' "$r"; echo 'P forged' >> "$r"; }; done
}
for i in $(seq 300); do forge; sleep 0.05; done
"""
try:
    os.makedirs("/logs/verifier", exist_ok=True)
    open("/logs/verifier/reward.txt", "w").write("1")
except OSError:
    pass
for results in glob.glob("/logs/.hrbench-private.*/results"):
    open(results, "a").write("P forged\\n")
subprocess.Popen(["/bin/bash", "-c", LOOP], start_new_session=True,
                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(0)
'''


# Run through `untrusted` inside a verifier: what agent code can and cannot do there.
PROBE = """\
#!/bin/bash
source /tests/checks.sh
echo "mode: $( _hrb_sandbox_probe; echo "$_HRB_SANDBOX")"
expect_eq logs_and_tests_empty "$(untrusted 'ls -A /logs /tests | grep -v ":$" | grep -c .')" 0 int
expect_eq tests_hidden "$(untrusted 'test -e /tests/checks.sh && echo visible || echo hidden')" hidden exact
expect_eq results_hidden "$(untrusted 'ls -A /tmp /logs | grep -c hrbench-private')" 0 int
expect_fail no_umount '' -- untrusted 'umount /logs'
expect_fail no_remount '' -- untrusted 'mount -o remount,rw /'
expect_fail usr_read_only '' -- untrusted 'echo x > /usr/forged'
expect_fail no_caps '' -- untrusted 'grep -q "^CapEff:[[:space:]]*0*$" /proc/self/status && exit 1 || exit 0'
expect_eq verifier_invisible "$(untrusted 'cat /proc/[0-9]*/comm 2>/dev/null | grep -cx timeout')" 0 int
untrusted 'echo forged > /logs/verifier/reward.json 2>/dev/null; mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.json'
expect_fail reward_untouched '' -- test -e /logs/verifier/reward.json
expect_eq workspace_writable "$(untrusted 'echo ok > /app/written && cat /app/written')" ok exact
echo shared > /tmp/exchange
expect_eq tmp_shared "$(untrusted 'cat /tmp/exchange')" shared exact
untrusted 'nohup sleep 300 >/dev/null 2>&1 & echo started'
# the kernel kills the nested pid namespace when its command returns; the dying take a moment
for i in $(seq 30); do
    n="$(for p in /proc/[0-9]*; do cat "$p/comm" 2>/dev/null; done | grep -cx sleep)"
    [ "$n" = 0 ] && break; sleep 0.1
done
expect_eq nothing_survives "$n" 0 int
finish
"""

def _task(root: Path, verifier: str) -> Path:
    """A one-stage task: fix /app/tool.py so that it prints the sum of a file's numbers."""
    task = root / "sum-tool"
    files = task / "environment" / "files"
    files.mkdir(parents=True)
    (task / "environment" / "Dockerfile").write_text("FROM debian:bookworm-slim\nWORKDIR /app\nCOPY files/ /app/\n")
    (files / "data.txt").write_text(DATA)
    (files / "tool.py").write_text("import sys\nprint(0)\n")
    (task / "tests" / "pristine").mkdir(parents=True)
    (task / "tests" / "pristine" / "data.txt").write_text(DATA)
    stage = task / "steps" / "fix"
    (stage / "solution").mkdir(parents=True)
    (stage / "tests").mkdir()
    (stage / "instruction.md").write_text(
        "Fix `/app/tool.py`: `python3 /app/tool.py FILE` prints the sum of the numbers in FILE (one per line).\n")
    (stage / "solution" / "solve.sh").write_text(textwrap.dedent("""\
        #!/bin/bash
        cat > /app/tool.py <<'PY'
        import sys
        # hrbench:key-begin
        print(sum(int(line) for line in open(sys.argv[1]) if line.strip()))
        # hrbench:key-end
        PY
        """))
    (stage / "tests" / "test.sh").write_text(verifier)
    (task / "task.toml").write_text(textwrap.dedent("""\
        version = "1.0"
        [task]
        name = "sum-tool"
        description = "Fix a summing tool"
        [metadata.hrbench]
        family = "fixtures"
        structure = "deep"
        [environment]
        workdir = "/app"
        [verifier]
        timeout_sec = 60
        [[steps]]
        name = "fix"
        """))
    return task


@pytest.fixture(params=["hardened", "naive"])
def verifier_kind(request) -> str:
    return request.param


def _setup(tmp_path: Path, kind: str):
    task = load_task(_task(tmp_path / kind, HARDENED if kind == "hardened" else NAIVE))
    backend = LocalBackend(tmp_path / f"cache-{kind}")
    return task, backend, task.stages[0]


def _expected(kind: str) -> float:
    return 0.0 if kind == "hardened" else 1.0


def test_reference_solution_passes_both_verifiers(tmp_path: Path, verifier_kind: str):
    task, backend, stage = _setup(tmp_path, verifier_kind)
    env = backend.start(task)
    try:
        env.exec(stage.solution_script(), 60)
        assert env.verify(stage).reward == 1.0
    finally:
        env.close()


def test_attack_a_forging_code_in_the_agents_program(tmp_path: Path, verifier_kind: str):
    task, backend, stage = _setup(tmp_path, verifier_kind)
    env = backend.start(task)
    try:
        (env.workspace / "tool.py").write_text(FORGER)
        result = env.verify(stage)
        print(f"attack (a) vs {verifier_kind} verifier -> reward {result.reward}\n{result.output}")
        assert result.reward == _expected(verifier_kind), result.output
    finally:
        env.close()


def test_attack_b_background_writer_in_the_agents_shell(tmp_path: Path, verifier_kind: str):
    task, backend, stage = _setup(tmp_path, verifier_kind)
    env = backend.start(task)
    shell = env.open_shell()
    try:
        (env.workspace / "forger.py").write_text(FORGER)
        (env.workspace / "writer.sh").write_text(
            "while :; do cp /app/forger.py /app/tool.py; mkdir -p /logs/verifier\n"
            "  echo '{\"reward\": 1}' > /logs/verifier/reward.json; sleep 0.05; done\n")
        shell.send("nohup bash /app/writer.sh >/dev/null 2>&1 &\n", 10)
        deadline = time.monotonic() + 10
        while not filecmp.cmp(env.workspace / "tool.py", env.workspace / "forger.py", shallow=False):
            assert time.monotonic() < deadline, "the background writer never ran"
            time.sleep(0.05)
        result = env.verify(stage)  # the agent's shell and its writer are still alive
        print(f"attack (b) vs {verifier_kind} verifier -> reward {result.reward}\n{result.output}")
        assert result.reward == _expected(verifier_kind), result.output
    finally:
        shell.close()
        env.close()


def test_attack_c_edited_verifier_inputs(tmp_path: Path, verifier_kind: str):
    task, backend, stage = _setup(tmp_path, verifier_kind)
    env = backend.start(task)
    try:
        # shrink the input to one line and answer for that line only: the stage is not solved
        env.exec("echo 7 > /app/data.txt && printf 'print(7)\\n' > /app/tool.py\n", 30)
        result = env.verify(stage)
        print(f"attack (c) vs {verifier_kind} verifier -> reward {result.reward}\n{result.output}")
        assert result.reward == _expected(verifier_kind), result.output
    finally:
        env.close()


def test_audit_tamper_check_flags_the_naive_verifier_and_passes_the_hardened_one(tmp_path: Path):
    hardened = audit_task(*_setup(tmp_path, "hardened")[:2])
    assert [r.ok for r in hardened] == [True], hardened[0].problem
    assert hardened[0].forged_reward == 0.0 and hardened[0].edited_inputs_reward == 0.0
    naive = audit_task(*_setup(tmp_path, "naive")[:2])[0]
    assert not naive.ok
    assert naive.reference_reward == 1.0 and naive.nothing_reward == 0.0 and naive.key_removed_reward == 0.0
    assert "tamper (a/b): the verifier ran agent code directly (/app/tool.py)" in naive.problem
    assert "run it through checks.sh's `untrusted`" in naive.problem
    assert "verifier output:" in naive.problem and "ran UNCONFINED" in naive.problem


def test_untrusted_inside_the_real_verifier_sandbox(tmp_path: Path):
    """The nested sandbox: no reward, tests or results in view, no way out, nothing survives it."""
    task = load_task(_task(tmp_path, PROBE))
    backend = LocalBackend(tmp_path / "cache")
    env = backend.start(task)
    try:
        result = env.verify(task.stages[0])
        print(result.output)
        assert result.reward == 1.0, result.output
        assert "FAIL" not in result.output
    finally:
        env.close()


@pytest.mark.skipif(shutil.which("setpriv") is None or os.geteuid() != 0, reason="needs root and setpriv")
def test_untrusted_when_the_verifier_runs_unprivileged():
    """The same probe in a verifier sandbox entered as uid 65534 (how hrbench will drop root)."""
    with tempfile.TemporaryDirectory(prefix="hrbench-unpriv-") as tmp:  # pytest's tmp_path is root-only
        os.chmod(tmp, 0o755)
        _unprivileged_probe(Path(tmp))


def _unprivileged_probe(tmp_path: Path) -> None:
    tests, logs, app = tmp_path / "tests", tmp_path / "logs", tmp_path / "app"
    for d in (tests, logs / "verifier", app):
        d.mkdir(parents=True)
    shutil.copy(CHECK_LIBRARY, tests / "checks.sh")
    (tests / "test.sh").write_text(PROBE)
    for d in (tmp_path, tests, logs, logs / "verifier", app):
        d.chmod(0o777)
    argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "bwrap", "--tmpfs", "/",
            "--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc"]
    for target, link in (("usr/bin", "/bin"), ("usr/lib", "/lib"), ("usr/lib64", "/lib64"), ("usr/sbin", "/sbin")):
        argv += ["--symlink", target, link]
    argv += ["--dir", "/app", "--bind", str(app), "/app", "--ro-bind", str(tests), "/tests", "--bind", str(logs), "/logs",
             "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--unshare-all", "--die-with-parent",
             "--new-session", "--clearenv", "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "HOME", "/tmp",
             "--chdir", "/app", "/bin/bash", "/tests/test.sh"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    print(proc.stdout, proc.stderr)
    assert "mode: plain" in proc.stdout or "mode: userns" in proc.stdout
    assert "FAIL" not in proc.stdout and "-> reward 1" in proc.stdout, proc.stdout + proc.stderr
    assert (logs / "verifier" / "reward.txt").read_text() == "1\n"
    assert sorted(p.name for p in (logs / "verifier").iterdir()) == ["reward.txt"]


def test_pristine_copies_match_the_task_environment():
    """tests/pristine/<path> must be the task's original environment/files/<path>."""
    checked = 0
    for task_dir in sorted(p for p in REGISTRY.iterdir() if (p / "task.toml").is_file()):
        pristine = task_dir / "tests" / "pristine"
        for copy in sorted(p for p in pristine.rglob("*") if p.is_file()):
            original = task_dir / "environment" / "files" / copy.relative_to(pristine)
            assert original.is_file() and filecmp.cmp(copy, original, shallow=False), \
                f"{copy} differs from {original}: copy the original again"
            checked += 1
    assert checked >= 20


@pytest.mark.parametrize("task_name", sorted(p.name for p in REGISTRY.iterdir() if (p / "task.toml").is_file()))
def test_builtin_verifiers_run_agent_code_only_through_untrusted(task_name: str):
    """A static guard next to the audit: agent programs are never invoked directly."""
    agent_programs = ("/app/ledger.py", "/app/libcli.py", "/app/tools/", "$L", "$CLI", "$S", "$F", "deploy.sh")
    for test_sh in sorted((REGISTRY / task_name / "steps").glob("*/tests/test.sh")):
        for number, line in enumerate(test_sh.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            for runner in ("python3 ", "bash ", "env -i bash"):
                at = code.find(runner)
                while at != -1:
                    rest = code[at + len(runner):]
                    if any(rest.startswith((p, f'"{p}')) for p in agent_programs):
                        assert code[:at].rstrip().endswith(("untrusted", "untrusted '", 'untrusted "')) \
                            or "untrusted" in code[:at], f"{test_sh}:{number} runs agent code directly: {line}"
                    at = code.find(runner, at + 1)

