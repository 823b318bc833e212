"""Protects the generated task packages (depth calibration, long transduction): they are exactly what
their generator writes, they load, their verifiers pass the audit, judge only the agent's output file
against the expected copy shipped with the tests, and cannot be fooled through the workspace."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from hrbench.envs.local import LocalBackend
from hrbench.structure.work import counted_lines, script_work, task_work
from hrbench.tasks.audit import audit_task
from hrbench.tasks.loader import load_registry, load_task
from hrbench.transduction.families import generate
from hrbench.transduction.packages import (
    REGISTRY_SET,
    chunk_bounds,
    write_document_task,
)

REGISTRY = Path(__file__).resolve().parents[2] / "task_registry"
GENERATOR = REGISTRY / "generators" / "generate.py"


def _files(root: Path, prefixes: tuple[str, ...]) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and p.relative_to(root).parts[0].startswith(prefixes)}


def test_committed_generated_tasks_are_byte_identical_to_a_fresh_generation(tmp_path: Path):
    result = subprocess.run([sys.executable, str(GENERATOR), str(tmp_path)], capture_output=True, text=True,
                            timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    fresh, committed = _files(tmp_path, ("calib-", "lt-")), _files(REGISTRY, ("calib-", "lt-"))
    assert sorted(fresh) == sorted(committed)
    assert [k for k in fresh if fresh[k] != committed[k]] == []


def test_generated_tasks_load_with_their_families():
    tasks = {t.name: t for t in load_registry(REGISTRY)}
    calib = [t for n, t in tasks.items() if n.startswith("calib-")]
    assert sorted(t.name for t in calib) == ["calib-encrypted-chain", "calib-parallel", "calib-static-chain"]
    lt = [t for n, t in tasks.items() if n.startswith("lt-")]
    assert len(lt) == 2 * len(REGISTRY_SET) == 40
    for chunks in (2, 4):
        parts = [t for t in lt if t.name.endswith(f"-k{chunks}")]
        for family in ("arithmetic", "uuid_sort", "variable_lookup", "table"):
            assert sum(t.family == f"transduction-{family}" for t in parts) == 5
        # a chain: part j needs part j-1, and nothing else
        assert all(t.n_stages == chunks and t.docker_only is None and
                   [s.depends_on for s in t.stages[1:]] == [(f"part{j}",) for j in range(1, chunks)] for t in parts)


def test_cli_task_list_shows_the_generated_tasks():
    out = subprocess.run([sys.executable, "-m", "pipelines.cli", "tasks", "list", "--registry", str(REGISTRY)],
                         capture_output=True, text=True, timeout=120, check=False, env={"COLUMNS": "250", "PATH": "/usr/bin:/bin",
                                                                           "PYTHONPATH": str(REGISTRY.parent)})
    assert out.returncode == 0, out.stderr
    for name in ("calib-parallel", "calib-encrypted-chain", "lt-arith-noids-d2-n12-s0-k2", "lt-table-kvresolve-d1"):
        assert name in out.stdout


def test_chunks_cover_the_output_evenly():
    assert chunk_bounds(13, 3) == [(1, 5), (6, 9), (10, 13)]
    with pytest.raises(ValueError, match="cannot split 2 output lines into 3"):
        chunk_bounds(2, 3)


def test_a_freshly_written_three_chunk_document_passes_the_audit(tmp_path: Path):
    task = load_task(write_document_task(generate("uuid_sort", "shuffled_ids", 2, 7), tmp_path / "reg", chunks=3))
    assert [s.weight for s in task.stages] == [3.0, 2.0, 2.0]
    rows = audit_task(task, LocalBackend(tmp_path / "cache"))
    assert [r.ok for r in rows] == [True, True, True], [r.problem for r in rows]


def _reward_after(task, stage_index: int, script: str, tmp_path: Path) -> float:
    env = LocalBackend(tmp_path / "cache").start(task, stage_index)
    try:
        env.exec(script, 30)
        return env.verify(task.stages[stage_index]).reward
    finally:
        env.close()


def test_transduction_verifier_cannot_be_pointed_at_the_expected_copy_or_fooled_by_bad_earlier_lines(tmp_path):
    task = load_task(REGISTRY / "lt-arith-orderedids-d1-n12-s0-k2")
    assert _reward_after(task, 0, "ln -sf /tests/expected.txt /app/output.txt", tmp_path) == 0.0
    assert _reward_after(task, 0, "cp /dev/null /app/output.txt", tmp_path) == 0.0
    assert _reward_after(task, 0, "mkfifo /app/output.txt", tmp_path) == 0.0  # refused, not waited on
    # part 2 from the oracle checkpoint, but with a damaged line 1: the cumulative check fails it
    ref = task.stages[1].solution_script()
    assert _reward_after(task, 1, ref, tmp_path) == 1.0
    assert _reward_after(task, 1, ref + "\nsed -i '1s/]/]9/' /app/output.txt\n", tmp_path) == 0.0
    # writing past the part's last line fails too
    assert _reward_after(task, 0, task.stages[0].solution_script() + "\necho '[7]1' >> /app/output.txt\n",
                         tmp_path) == 0.0


def test_calibration_verifier_needs_every_answer_and_refuses_a_symlink(tmp_path: Path):
    task = load_task(REGISTRY / "calib-static-chain")
    ref = task.stages[0].solution_script()
    assert _reward_after(task, 0, ref, tmp_path) == 1.0
    assert _reward_after(task, 0, "ln -s /tests/expected.txt /app/answers.txt", tmp_path) == 0.0
    assert _reward_after(task, 0, "mkfifo /app/answers.txt", tmp_path) == 0.0
    assert _reward_after(task, 0, ref + "\nsed -i 's/^step4: .*/step4: 000000/' /app/answers.txt\n",
                         tmp_path) == 0.0


def test_encrypted_steps_open_only_with_the_previous_answer():
    files = REGISTRY / "calib-encrypted-chain" / "environment" / "files" / "steps"
    expected = (REGISTRY / "calib-encrypted-chain/steps/answers/tests/expected.txt").read_text().splitlines()
    assert sorted(p.name for p in files.iterdir()) == ["01.txt"] + [f"{k:02d}.enc" for k in range(2, 11)]
    assert b"data:" not in (files / "02.enc").read_bytes()

    def decrypt(password: str) -> subprocess.CompletedProcess:
        return subprocess.run(["openssl", "enc", "-aes-256-cbc", "-pbkdf2", "-d", "-pass", f"pass:{password}",
                               "-in", str(files / "02.enc")], capture_output=True, check=False)
    assert b"Step 2 of 10" not in decrypt("0").stdout
    right = decrypt(expected[0].split(": ")[1])
    assert right.returncode == 0 and right.stdout.startswith(b"Step 2 of 10")


def test_work_counts_non_blank_non_comment_lines_in_lines_and_characters():
    script = "#!/bin/bash\n\n# a comment\ncd /app\n   # indented comment\n  echo hi  \n"
    assert counted_lines(script) == ["cd /app", "echo hi"]
    assert script_work(script) == (2, len("cd /app\necho hi"), None)
    assert script_work(script, count_tokens=lambda text: len(text.split()))[2] == 4
    task = load_task(REGISTRY / "calib-parallel")
    w = task_work(task)
    assert w.lines == task.work == 11 and w.chars > 10 * w.lines
    assert w.tokens is None or w.tokens > w.lines  # o200k_base only when available offline


def test_every_transduction_task_names_the_document_it_was_written_from(tmp_path: Path):
    from hrbench.transduction.packages import document_for_task

    for task_dir in sorted(REGISTRY.glob("lt-*")):
        doc, chunks = document_for_task(task_dir)
        last = task_dir / "steps" / f"part{chunks}" / "tests" / "expected.txt"
        assert last.read_text().splitlines() == list(doc.expected)
        assert (task_dir / "environment" / "files" / "input.txt").read_text() == doc.input_text
    with pytest.raises(ValueError, match="not a transduction task"):
        document_for_task(REGISTRY / "calib-parallel")
