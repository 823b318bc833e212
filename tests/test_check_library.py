"""Tests for the bash check library hrbench/tasks/checks.sh (Table 7 of the depth paper)."""
from __future__ import annotations

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
