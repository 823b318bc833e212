"""Tests for the bash check library hrbench/tasks/checks.sh (Table 7 of the depth paper)."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

CHECKS = Path(__file__).resolve().parents[1] / "hrbench" / "tasks" / "checks.sh"

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="bash is required")


class Result:
    def __init__(self, proc: subprocess.CompletedProcess, logs: Path):
        self.rc = proc.returncode
        self.out = proc.stdout
        self.err = proc.stderr
        rf = logs / "verifier" / "reward.txt"
        self.reward = rf.read_text().strip() if rf.exists() else None

    def lines(self, prefix: str) -> list[str]:
        return [l for l in self.out.splitlines() if l.startswith(prefix)]

    def status(self, name: str) -> str:
        for line in self.out.splitlines():
            if line == f"PASS {name}":
                return "PASS"
            if line.startswith(f"FAIL {name}:"):
                return "FAIL"
        raise AssertionError(f"no result for {name!r} in:\n{self.out}\n{self.err}")


@pytest.fixture
def run(tmp_path):
    """Run a check script body (checks.sh sourced first) in tmp_path; return Result."""

    def _run(body: str, finish: bool = True, env: dict | None = None) -> Result:
        logs = tmp_path / "logs"
        script = tmp_path / "test.sh"
        text = f"source {CHECKS}\n" + textwrap.dedent(body) + ("\nfinish\n" if finish else "")
        script.write_text(text)
        e = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(tmp_path), "TMPDIR": str(tmp_path),
             "HRBENCH_LOGS": str(logs)}
        e.update(env or {})
        proc = subprocess.run(["bash", str(script)], cwd=tmp_path, env=e, capture_output=True, text=True,
                              timeout=60)
        return Result(proc, logs)

    return _run


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(text).lstrip("\n"))
    return p


# ------------------------------------------------------------------ command checks
def test_expect_ok(run):
    r = run("""
        expect_ok a -- true
        expect_ok b -- false
        expect_ok c -- 'echo hi | grep -q hi'
        expect_ok d -- bash -c 'exit 3'
    """)
    assert [r.status(n) for n in "abcd"] == ["PASS", "FAIL", "PASS", "FAIL"]
    assert "exit status 3" in r.lines("FAIL d:")[0]
    assert r.reward == "0"


def test_expect_out_normalises_case_and_spaces(run):
    r = run("""
        expect_out a 'total : 5' -- printf 'Header\\nTOTAL:    5\\n'
        expect_out b 'port=8080' -- printf 'PORT = 8080\\n'
        expect_out c 'missing' -- printf 'nothing here\\n'
        expect_out d 'oops' -- bash -c 'echo OOPS >&2; exit 1'
        expect_out e 'a(b' -- echo 'xa(b'
    """)
    assert [r.status(n) for n in "abcde"] == ["PASS", "PASS", "FAIL", "PASS", "PASS"]


def test_expect_no_out(run):
    r = run("""
        expect_no_out a error -- echo fine
        expect_no_out b error -- echo 'an ERROR'
        expect_no_out c error -- false
        expect_no_out d '.' -- true
    """)
    assert [r.status(n) for n in "abcd"] == ["PASS", "FAIL", "FAIL", "PASS"]


def test_expect_fail(run):
    r = run("""
        expect_fail a denied -- bash -c 'echo Permission DENIED >&2; exit 1'
        expect_fail b denied -- echo denied
        expect_fail c denied -- bash -c 'echo other; exit 2'
        expect_fail d '' -- false
    """)
    assert [r.status(n) for n in "abcd"] == ["PASS", "FAIL", "FAIL", "PASS"]


def test_timeout(run):
    r = run("expect_ok slow -- sleep 5\n", env={"HRBENCH_CHECK_TIMEOUT": "1"})
    assert r.status("slow") == "FAIL"
    assert "timed out" in r.lines("FAIL slow:")[0]


def test_a_command_killed_before_its_timeout_is_not_called_timed_out(run):
    # exit 137 is SIGKILL: from timeout(1) only when the command ignored TERM (then it counts as timed out), else
    # from something else, e.g. the OOM killer at the memory bound; expect_fail counts that as failing
    r = run("""
        expect_ok killed -- bash -c 'kill -9 $$'
        expect_fail killed_fails '' -- bash -c 'kill -9 $$'
        expect_ok stubborn -- bash -c 'trap "" TERM; sleep 30'
        expect_fail stubborn_fails '' -- bash -c 'trap "" TERM; sleep 30'
    """, env={"HRBENCH_CHECK_TIMEOUT": "1"})
    assert "killed by SIGKILL (exit status 137" in r.lines("FAIL killed:")[0]
    assert "timed out" not in r.lines("FAIL killed:")[0]
    assert r.status("killed_fails") == "PASS"
    assert "timed out after 1s" in r.lines("FAIL stubborn:")[0]
    assert r.status("stubborn_fails") == "FAIL" and "timed out" in r.lines("FAIL stubborn_fails:")[0]


def test_expect_file(run, tmp_path):
    write(tmp_path, "full.txt", "x\n")
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "d").mkdir()
    r = run("""
        expect_file a full.txt
        expect_file b empty.txt
        expect_file c d
        expect_file e nope.txt
    """)
    assert [r.status(n) for n in "abce"] == ["PASS", "FAIL", "PASS", "FAIL"]


def test_expect_port(run):
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    port = s.getsockname()[1]
    try:
        s2 = socket.socket(); s2.bind(("127.0.0.1", 0)); closed = s2.getsockname()[1]; s2.close()
        r = run(f"expect_port open 127.0.0.1 {port}\nexpect_port closed 127.0.0.1 {closed}\n")
    finally:
        s.close()
    assert r.status("open") == "PASS"
    assert r.status("closed") == "FAIL"


def test_expect_proc_and_args(run, tmp_path):
    write(tmp_path, "myserver.py", "import time\ntime.sleep(30)\n")
    proc = subprocess.Popen([sys.executable, str(tmp_path / "myserver.py"), "--port", "9123", "--mode=fast"])
    cmdline = Path(f"/proc/{proc.pid}/cmdline")
    for _ in range(100):  # wait until the interpreter (possibly behind a shim) runs the script
        argv = cmdline.read_bytes().split(b"\0")
        if len(argv) > 1 and argv[1].endswith(b"myserver.py"):
            break
        time.sleep(0.05)
    try:
        r = run("""
            expect_proc a myserver.py
            expect_proc b myserver
            expect_proc c nosuchprog
            expect_proc_arg d myserver.py --port 9123
            expect_proc_arg e myserver.py --mode=fast
            expect_proc_arg f myserver.py --port 9999
            t="$(proc_start myserver.py)"
            expect_eq g "$t" "$(date +%s)" num:120
        """)
    finally:
        proc.kill()
        proc.wait()
    assert [r.status(n) for n in "abcdefg"] == ["PASS", "PASS", "FAIL", "PASS", "PASS", "FAIL", "PASS"], r.out + r.err


def test_pass_fail_and_subshell_results_count(run):
    r = run("""
        pass mine
        ( fail inner 'from a subshell' )
    """)
    assert r.status("mine") == "PASS"
    assert r.lines("FAIL inner:") == ["FAIL inner: from a subshell"]
    assert r.reward == "0"


# ------------------------------------------------------------------ expect_eq kinds
@pytest.mark.parametrize("kind, actual, expected, ok", [
    ("text", " 'Hello   World' ", "hello world", True),
    ("text", "a = 1", "A=1", True),
    ("text", "abc", "abd", False),
    ("text", "", "", False),                       # empty expected fails
    ("", "Yes", "yes", True),                      # default kind is text
    ("int", "count: 42 rows", "42", True),
    ("int", "3.0", "3", True),
    ("int", "3.5", "3", False),
    ("int", "none", "3", False),
    ("num", "0.3333333", "0.33333334", True),
    ("num", "12.34", "12.3", False),
    ("num:0.05", "12.34", "12.3", True),
    ("num", "-1.5e3", "-1500", True),
    ("version", "5.7.21-log", "5.7.21", True),
    ("version", "Python 3.11.2", "3.11.2", True),
    ("version", "1.2", "1.2.0", True),
    ("version", "1.10", "1.9", False),
    ("bool", "yes", "ON", True),
    ("bool", "PASS", "true", True),
    ("bool", "0", "off", True),
    ("bool", "disabled", "true", False),
    ("bool", "maybe", "true", False),
    ("set", "b,a,a", "a\nb", True),
    ("set", "[\"x\", \"y\"]", "y;x", True),
    ("set", "a b c", "c a b", True),
    ("set", "a,b", "a,b,c", False),
    ("set", "", "", True),                         # two empty sets are equal
    ("set", "a", "", False),
    ("seq", "[a, b]", "a;b", True),
    ("seq", "b a", "a b", False),
    ("seq", "a\nb\nb", "a,b", False),
    ("exact", "A", "A", True),
    ("exact", "A", "a", False),
    ("exact", "a ", "a", False),
    # decided in bash or by awk (checks.sh's _hrb_eq_here), always as awk decides: two values that both
    # read as numbers compare as numbers, anything else as text
    ("exact", "10", "10.0", True),
    ("exact", " 7", "7", True),
    ("exact", "1e2", "100", True),
    ("exact", "[1]10", "[1]10.0", False),
    ("exact", "a\nb", "a\nb", True),
    ("exact", "a\nb", "a\nc", False),
    ("exact", "", "", False),                      # empty expected fails
    ("int", "007", "7", True),
    ("int", "12", "13", False),
    ("int", "123456789012345678", "123456789012345679", True),  # awk's doubles: equal beyond 15 digits
    ("text", "Same Words", "Same Words", True),
    ("text", "\"\"", "\"\"", False),                # nothing but quotes: an empty expected value
])
def test_expect_eq_kinds(run, kind, actual, expected, ok):
    r = run(f'expect_eq k "$A" "$B" {kind}\n', env={"A": actual, "B": expected})
    assert r.status("k") == ("PASS" if ok else "FAIL"), r.out


def test_expect_eq_reason(run):
    r = run('expect_eq k 5 6 int\n')
    assert r.lines("FAIL k:") == ["FAIL k: got '5', expected '6' (int)"]


# ------------------------------------------------------------------ readers
def test_field_name_value_and_ini(run, tmp_path):
    write(tmp_path, "r.txt", """
        Total Rows: 5
        error-rate = 0.125
        name: "quoted value"
        url: http://x:80/a
    """)
    write(tmp_path, "c.ini", """
        [server]
        port = 8080
        [client]
        port = 9090
        export TOKEN=abc
    """)
    r = run("""
        expect_eq a "$(field r.txt total_rows)" 5 int
        expect_eq b "$(field r.txt 'ERROR RATE')" 0.125 exact
        expect_eq c "$(field r.txt name)" "quoted value" exact
        expect_eq d "$(field r.txt url)" "http://x:80/a" exact
        expect_eq e "$(field c.ini port)" 8080 exact
        expect_eq f "$(field c.ini client.port)" 9090 exact
        expect_eq g "$(field c.ini token)" abc exact
        field r.txt missing && fail h 'missing key found' || pass h
        expect_eq i "$(printf 'k: v\\n' | field - k)" v exact
        expect_eq j "$(field <(echo 'x = 1') x)" 1 exact
    """)
    assert r.lines("FAIL") == []
    assert r.reward == "1"


def test_field_json(run, tmp_path):
    write(tmp_path, "r.json", '{"total": 5, "items": ["a", "b"], "nested": {"ok-flag": true, "n": null},'
                              ' "rows": [{"id": 1}, {"id": 2}]}')
    r = run("""
        expect_eq a "$(field r.json TOTAL)" 5 int
        expect_eq b "$(field r.json items)" "a,b" seq
        expect_eq c "$(field r.json nested.ok_flag)" true exact
        expect_eq d "$(field r.json rows.1.id)" 2 int
        field r.json nested.none && fail e found || pass e
    """)
    assert r.lines("FAIL") == []


TABLES = {
    "t.csv": 'id,name,total\n1,"Smith, J",5\n2,Bob,7\n3,Ann,9\n',
    "t.tsv": "id\tname\ttotal\n1\tSmith, J\t5\n2\tBob\t7\n3\tAnn\t9\n",
    "t.md": "| ID | Name | Total |\n|---|:---|---:|\n| 1 | Smith, J | 5 |\n| 2 | Bob | 7 |\n| 3 | Ann | 9 |\n",
    "t.txt": "id  name   total\n--  -----  -----\n1   Smith  5\n2   Bob    7\n3   Ann    9\n",
    "t.json": '[{"id": 1, "name": "Smith, J", "total": 5}, {"id": 2, "name": "Bob", "total": 7},'
              ' {"id": 3, "name": "Ann", "total": 9}]',
    "w.json": '{"rows": [{"id": 1, "name": "Smith, J", "total": 5}, {"id": 2, "name": "Bob", "total": 7},'
              ' {"id": 3, "name": "Ann", "total": 9}]}',
}


@pytest.mark.parametrize("fname", sorted(TABLES))
def test_table_readers(run, tmp_path, fname):
    (tmp_path / fname).write_text(TABLES[fname])
    first = "Smith" if fname == "t.txt" else "Smith, J"
    r = run(f"""
        expect_eq col "$(column {fname} total)" "5 7 9" seq
        expect_eq col_pos "$(column {fname} :3)" "5 7 9" seq
        expect_eq col_name_pos "$(column {fname} TOTAL:3)" "5 7 9" seq
        expect_eq names "$(column {fname} name | head -n 1)" "{first}" exact
        expect_eq cell "$(cell {fname} name Bob total)" 7 int
        expect_eq cell_ci "$(cell {fname} Name:2 bob Total:3)" 7 int
        expect_eq rows "$(rows {fname} id)" 3 int
        expect_eq rows_guess "$(rows {fname})" 3 int
        cell {fname} name nobody total && fail missing 'found a row' || pass missing
    """)
    assert r.lines("FAIL") == [], r.out
    assert r.reward == "1"


def test_readers_missing_header_and_names(run, tmp_path):
    write(tmp_path, "nohdr.csv", "1,a,5\n2,b,7\n")
    write(tmp_path, "h.csv", "Order-ID,Unit Price\n1,2.50\n2,3.00\n")
    r = run("""
        expect_eq a "$(column nohdr.csv total:3)" "5,7" seq
        expect_eq b "$(rows nohdr.csv total:3)" 2 int
        expect_eq c "$(cell nohdr.csv :1 2 :3)" 7 int
        expect_eq d "$(column h.csv unit_price)" "2.50 3.00" seq
        expect_eq e "$(cell h.csv order_id 2 'unit price')" 3 num
        column h.csv nosuch && fail f 'found a column' || pass f
        column missing.csv total && fail g 'read a missing file' || pass g
    """)
    assert r.lines("FAIL") == [], r.out


# ------------------------------------------------------------------ finish / reward
def test_reward_one_when_all_pass(run):
    r = run("pass a\nexpect_ok b -- true\n")
    assert r.reward == "1"
    assert "2 passed, 0 failed" in r.out


def test_reward_zero_when_one_fails(run):
    r = run("pass a\nfail b because\npass c\n")
    assert r.reward == "0"


def test_reward_zero_when_no_check_ran(run):
    r = run("true\n")
    assert r.reward == "0"


def test_stops_before_last_line_leaves_no_reward(run):
    r = run("pass a\nexit 0\n")
    assert r.reward is None


def test_crash_before_finish_leaves_no_reward(run):
    r = run("pass a\nset -u\necho $UNDEFINED_VARIABLE\n")
    assert r.reward is None


def test_stale_reward_is_removed_when_sourced(run, tmp_path):
    (tmp_path / "logs" / "verifier").mkdir(parents=True)
    (tmp_path / "logs" / "verifier" / "reward.txt").write_text("1\n")
    r = run("pass a\nexit 0\n", finish=False)
    assert r.reward is None


def test_a_check_name_with_a_newline_cannot_forge_reward_json(run, tmp_path):
    """A check named after agent output (a file name, a printed line) may hold a newline. It must not add
    lines to the results file, where `S name value` lines become reward.json's keys (a second `reward`
    key after the real one is what a JSON reader keeps) and `F` lines fail the stage."""
    r = run("""
        fail real x
        subreward acc 0.5
        pass $'x\\nS acc":0,"reward 1'
        pass $'y\\nF forged'
    """)
    data = (tmp_path / "logs" / "verifier" / "reward.json").read_text()
    assert json.loads(data) == {"reward": 0, "acc": 0.5}, data
    assert "checks: 2 passed, 1 failed -> reward 0" in r.out
    # and a passing verifier stays passing: the forged F line is not counted
    r = run("""
        pass $'y\\nF forged'
        subreward acc 1
    """)
    assert json.loads((tmp_path / "logs" / "verifier" / "reward.json").read_text()) == {"reward": 1, "acc": 1}


def test_failing_check_does_not_abort(run):
    r = run("expect_ok a -- false\nexpect_eq b 1 2 int\npass c\n")
    assert r.status("c") == "PASS"
    assert r.reward == "0"


def test_table_extension_shares_one_parse(run, tmp_path):
    (tmp_path / "t.json").write_text(TABLES["t.json"])
    r = run("""
        T="$(table t.json)"
        expect_eq a "$(printf '%s\\n' "$T" | head -n 1 | tr '\\t' ' ')" "id name total" exact
        expect_eq b "$(printf '%s\\n' "$T" | cell - id 3 name)" Ann exact
        expect_eq c "$(printf '%s\\n' "$T" | rows - id)" 3 int
    """)
    assert r.lines("FAIL") == [], r.out


# ------------------------------------------------------------------ verifier integrity
def test_every_stale_reward_file_is_removed_when_sourced(run, tmp_path):
    logs = tmp_path / "logs" / "verifier"
    logs.mkdir(parents=True)
    for name in ("reward.txt", "reward.json", ".hidden", "extra.json"):
        (logs / name).write_text('{"reward": 1}\n')
    (logs / "sub").mkdir()
    r = run("pass a\nexit 0\n", finish=False)
    assert r.reward is None and sorted(p.name for p in logs.iterdir()) == []


def test_finish_removes_a_reward_json_written_during_the_checks(run, tmp_path):
    # code the verifier ran wrote a reward.json, which the harness would prefer over reward.txt
    r = run("""
        fail a wrong
        echo '{"reward": 1}' > "$HRBENCH_LOGS/verifier/reward.json"
        touch "$HRBENCH_LOGS/verifier/other"
    """)
    assert r.reward == "0"
    assert sorted(p.name for p in (tmp_path / "logs" / "verifier").iterdir()) == ["reward.txt"]


def test_results_are_kept_out_of_the_temporary_directory(run, tmp_path):
    r = run("""
        pass a
        ls -A "$TMPDIR" | grep -c -e hrbchecks -e hrbench-private || true
        case "$_HRB_PRIV" in "$HRBENCH_LOGS"/.hrbench-private.*) test -f "$_HRB_PRIV/results" && echo private-results ;; esac
    """)
    assert "private-results" in r.out and r.lines("0") == ["0"]
    assert not list((tmp_path / "logs").glob(".hrbench-private.*")), "finish removes the private directory"


def test_inherited_functions_and_hooks_are_dropped(tmp_path):
    logs = tmp_path / "logs"
    script = tmp_path / "test.sh"
    script.write_text(f"source {CHECKS}\nexpect_out g '^hi$' -- 'echo hi | grep hi'\n"
                      "echo \"path=$PATH bash_env=${BASH_ENV:-unset}\"\nfinish\n")
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin", "HOME": str(tmp_path), "TMPDIR": str(tmp_path),
           "HRBENCH_LOGS": str(logs), "BASH_ENV": str(tmp_path / "evil.sh"),
           "BASH_FUNC_grep%%": "() { echo forged; return 0; }"}
    (tmp_path / "evil.sh").write_text("pass forged_by_bash_env\n")
    (tmp_path / "grep").write_text("#!/bin/sh\necho forged\n")
    (tmp_path / "grep").chmod(0o755)
    proc = subprocess.run(["bash", str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60,
                          check=False)
    assert "path=/usr/bin:/bin:/usr/sbin:/sbin bash_env=unset" in proc.stdout
    assert "PASS g" in proc.stdout and "forged" not in proc.stdout


@pytest.mark.parametrize("runner", ["untrusted", "bash -c"])
def test_untrusted_cannot_reach_the_log_or_the_results(run, tmp_path, runner):
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is required")
    # agent code that rewrites the check library's results: run directly (bash -c) it wins
    forge = ('for f in "$HRBENCH_LOGS"/.hrbench-private.*/results; do sed -i "/^F /d" "$f"; echo "P forged" >> "$f"; done; '
             'echo "{\\"reward\\": 1}" > "$HRBENCH_LOGS/verifier/reward.json"')
    r = run(f"""
        fail a wrong
        {runner} '{forge}'
        expect_ok runs -- {runner} 'echo inside > "$TMPDIR/shared.txt"'
        expect_eq shared "$(cat "$TMPDIR/shared.txt")" inside exact
    """)
    if runner == "untrusted":
        assert r.reward == "0" and "checks: 2 passed, 1 failed -> reward 0" in r.out, r.out
    else:
        assert r.reward == "1" and "checks: 3 passed, 0 failed -> reward 1" in r.out, r.out
    assert sorted(p.name for p in (tmp_path / "logs" / "verifier").iterdir()) == ["reward.txt"]


# ------------------------------------------------------------------ the library's own processes
# checks.sh does with builtins what it can (every verifier pays for each process it starts); these pin
# what that must not change: the verifier's shell options, the reward bytes, the private directory.
def _script(tmp_path: Path, text: str, lib: Path = CHECKS, env: dict | None = None,
            argv: list[str] | None = None) -> subprocess.CompletedProcess:
    """Run `text` as test.sh (it sources `lib` itself, as `{lib}`) in tmp_path, logs in tmp_path/logs."""
    script = tmp_path / "test.sh"
    script.write_text(textwrap.dedent(text).replace("{lib}", str(lib)))
    e = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "TMPDIR": str(tmp_path), "HRBENCH_LOGS": str(tmp_path / "logs")}
    e.update(env or {})
    return subprocess.run([*(argv or []), "bash", str(script)], cwd=tmp_path, env=e, capture_output=True, text=True,
                          timeout=60, check=False)


def _verifier_files(tmp_path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in (tmp_path / "logs" / "verifier").iterdir()}


OPTIONS = 'o="$(shopt -p nullglob dotglob failglob)"; echo "${o//$\'\\n\'/; } flags=$-"'


@pytest.mark.parametrize("stale", [True, False], ids=["stale-files", "empty-log-dir"])
@pytest.mark.parametrize("prelude", ["", "shopt -s nullglob dotglob failglob; set -f", "shopt -s dotglob",
                                     "shopt -s failglob"])
def test_the_verifiers_shell_options_are_unchanged_by_source_and_finish(tmp_path, prelude, stale):
    verifier = tmp_path / "logs" / "verifier"
    verifier.mkdir(parents=True)
    if stale:
        (verifier / "reward.json").write_text('{"reward": 1}\n')
        (verifier / ".stale").write_text("1\n")
    planted = """echo '{"reward": 1}' > "$HRBENCH_LOGS/verifier/reward.json"; touch "$HRBENCH_LOGS/verifier/.other\"""" \
        if stale else ""
    proc = _script(tmp_path, f"""
        {prelude}
        {OPTIONS}
        source {{lib}}
        {OPTIONS}
        ls -A "$HRBENCH_LOGS/verifier" | wc -l
        fail a wrong
        {planted}
        finish
        {OPTIONS}
    """)
    lines = proc.stdout.splitlines()
    before, after_source, count = lines[0], lines[1], lines[2]
    after_finish = lines[-1]
    assert before == after_source == after_finish, proc.stdout + proc.stderr
    assert count.strip() == "0", "sourcing emptied the log directory, dot files included, whatever the options"
    assert _verifier_files(tmp_path) == {"reward.txt": b"0\n"}, "finish emptied it again before the reward"


@pytest.mark.parametrize("private", [True, False])
def test_reward_json_bytes_when_a_name_is_given_twice(tmp_path, private):
    if not private and shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is required (a read-only log root)")
    (tmp_path / "logs" / "verifier").mkdir(parents=True)
    argv = None
    if not private:  # no private directory can be made: the log root is read-only, TMPDIR does not exist
        logs = str(tmp_path / "logs")
        argv = ["bwrap", "--dev-bind", "/", "/", "--ro-bind", logs, logs, "--bind", f"{logs}/verifier", f"{logs}/verifier"]
    proc = _script(tmp_path, """
        source {lib}
        echo "private=${_HRB_PRIV:-none} home=$HOME"
        pass a
        subreward b 0.5
        subreward c 1
        subreward b 0
        subreward d 1.0
        ( subreward c 0.25 )
        subreward e 0.125
        finish
    """, env={"TMPDIR": str(tmp_path / "missing")}, argv=argv)
    assert ("private=none" not in proc.stdout) == private, proc.stdout + proc.stderr
    # first-seen order, the last value wins, values as given; a subshell's sub-reward counts only when the
    # results file exists
    c = "0.25" if private else "1"
    assert _verifier_files(tmp_path) == {
        "reward.json": f'{{"reward": 1, "b": 0, "c": {c}, "d": 1.0, "e": 0.125}}\n'.encode()}, proc.stdout + proc.stderr
    if not private:
        assert f"home={tmp_path}\n" in proc.stdout, "without a private directory HOME is left as it was"


# A copy of the library whose private-directory names are predictable (try 1 -> ...0000, try 2 -> ...0001, ...),
# so that a test can plant something at them: what a collision with a random name would meet.
NAME_LINE = """printf -v name '%s/.hrbench-private.%08x%08x' "$root" "$SRANDOM" "$SRANDOM\""""


def _predictable_library(tmp_path: Path) -> Path:
    text = CHECKS.read_text()
    assert text.count(NAME_LINE) == 1, "the private directory's name is no longer made by this line: update the test"
    lib = tmp_path / "checks-predictable.sh"
    lib.write_text(text.replace(NAME_LINE, """printf -v name '%s/.hrbench-private.%08x%08x' "$root" 0 "$((try - 1))\""""))
    return lib


@pytest.mark.parametrize("taken", ["logs:0,1", "logs:0,1,2,3", "logs:0,1,2,3 tmp:0,1,2,3"])
def test_a_private_directory_name_that_exists_is_never_used(tmp_path, taken):
    lib = _predictable_library(tmp_path)
    roots = {"logs": tmp_path / "logs", "tmp": tmp_path / "tmp"}
    for root in roots.values():
        (root / "verifier" if root.name == "logs" else root).mkdir(parents=True)
    planted = []
    for spec in taken.split():
        where, numbers = spec.split(":")
        for n in numbers.split(","):
            path = roots[where] / f".hrbench-private.{int(n):016x}"
            if int(n) % 2:  # a dangling symlink (mkdir would fail on it too) ...
                path.symlink_to(tmp_path / f"target-{where}-{n}")
            else:  # ... or somebody's directory with forged results in it
                path.mkdir()
                (path / "results").write_text("P planted\n")
            planted.append(path)
    proc = _script(tmp_path, """
        source {lib}
        echo "private=${_HRB_PRIV:-none} home=$HOME"
        pass a
        ( fail b in-a-subshell )
        finish
    """, lib=lib, env={"TMPDIR": str(roots["tmp"])})
    expected = {"logs:0,1": roots["logs"] / ".hrbench-private.0000000000000002",
                "logs:0,1,2,3": roots["tmp"] / ".hrbench-private.0000000000000000"}.get(taken)
    if expected is None:  # every name taken in both places: no private directory, as when none can be made
        assert f"private=none home={tmp_path}\n" in proc.stdout, proc.stdout + proc.stderr
        assert "checks: 1 passed, 0 failed" in proc.stdout, "subshell results do not count without the results file"
    else:
        assert f"private={expected} home={expected}/home\n" in proc.stdout, proc.stdout + proc.stderr
        assert "checks: 1 passed, 1 failed -> reward 0" in proc.stdout, "the fresh results file counted the subshell"
        assert not expected.exists(), "finish removed the private directory it made"
    for path in planted:  # nothing planted was used, followed or removed
        assert path.is_symlink() or (path / "results").read_text() == "P planted\n"
    assert not list(tmp_path.glob("target-*"))


@pytest.mark.parametrize("umask", ["0", "022"])
def test_the_private_directory_and_home_are_mode_700_whatever_the_umask(tmp_path, umask):
    proc = _script(tmp_path, f"""
        umask {umask}
        source {{lib}}
        stat -c 'mode %a' "$_HRB_PRIV" "$HOME"
        case "$_HRB_PRIV" in "$HRBENCH_LOGS"/.hrbench-private.????????????????) echo sixteen-hex-digits ;; esac
        pass a
        finish
    """)
    assert proc.stdout.splitlines()[:3] == ["mode 700", "mode 700", "sixteen-hex-digits"], proc.stdout + proc.stderr


def test_a_bash_without_srandom_still_gets_a_private_directory(tmp_path):
    # bash < 5.1 (a docker task image) has no SRANDOM: an unset one behaves like that (set -u: no crash)
    proc = _script(tmp_path, """
        unset SRANDOM
        set -u
        source {lib}
        stat -c 'mode %a' "$_HRB_PRIV"
        case "$HOME" in "$HRBENCH_LOGS"/.hrbench-private.??????/home) echo mktemp-name ;; esac
        pass a
        ( fail b in-a-subshell )
        finish
    """)
    assert proc.stdout.splitlines()[:2] == ["mode 700", "mktemp-name"], proc.stdout + proc.stderr
    assert "checks: 1 passed, 1 failed -> reward 0" in proc.stdout
    assert not list((tmp_path / "logs").glob(".hrbench-private.*"))


def test_a_globignore_set_by_the_verifier_does_not_hide_a_stale_reward(run, tmp_path):
    r = run("""
        GLOBIGNORE="$HRBENCH_LOGS/verifier/reward*"  # would hide it from a glob
        fail a wrong
        echo '{"reward": 1}' > "$HRBENCH_LOGS/verifier/reward.json"
    """)
    assert r.reward == "0" and _verifier_files(tmp_path) == {"reward.txt": b"0\n"}


@pytest.mark.parametrize("how", ["checks.sh", "./checks.sh", "sub/../checks.sh", "ABSOLUTE", "PHYSICAL"])
def test_the_tests_directory_is_found_however_the_library_is_sourced(tmp_path, how):
    tests = tmp_path / "real-tests"
    tests.mkdir()
    shutil.copy(CHECKS, tests / "checks.sh")
    (tests / "sub").mkdir()
    (tmp_path / "tests").symlink_to(tests)  # resolved: the physical path is what `untrusted` hides
    source = {"ABSOLUTE": str(tmp_path / "tests" / "checks.sh"), "PHYSICAL": str(tests / "checks.sh")}.get(how, how)
    script = tests / "test.sh"
    script.write_text(f'source {source}\necho "tests=$_HRB_TESTS"\npass a\nfinish\n')
    proc = subprocess.run(["bash", str(script)], cwd=tmp_path / "tests", capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "TMPDIR": str(tmp_path), "HRBENCH_LOGS": str(tmp_path / "logs")})
    assert f"tests={tests}\n" in proc.stdout, proc.stdout + proc.stderr


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace is required")
def test_a_passing_verifier_starts_only_mkdir_rm_and_mv(tmp_path):
    # the library's processes per run: one mkdir (private directory + HOME), one rm (it), one mv (the
    # reward's rename); a regression here costs every verifier run of every study
    (tmp_path / "logs" / "verifier").mkdir(parents=True)
    proc = _script(tmp_path, "source {lib}\npass a\nsubreward b 1\nfinish\n",
                   argv=["strace", "-f", "-qq", "-e", "trace=execve,clone,clone3,fork,vfork", "-o", str(tmp_path / "trace")])
    assert "checks: 1 passed, 0 failed -> reward 1" in proc.stdout, proc.stdout + proc.stderr
    trace = (tmp_path / "trace").read_text().splitlines()
    programs = [line.split('"')[1].rsplit("/", 1)[-1] for line in trace if "execve(" in line and "resumed" not in line]
    assert programs == ["bash", "mkdir", "rm", "mv"], programs
    # and no subshell besides them: one fork per program (none to list functions or resolve the tests folder)
    assert sum(1 for line in trace if " clone" in line and "resumed" not in line) == 3, trace
