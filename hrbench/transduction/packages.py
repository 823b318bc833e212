"""Transduction documents as real task packages, one stage per chunk of the output.

The whole input is in the workspace (``/app/input.txt``); the agent writes ``/app/output.txt``.
A document split into k chunks of its output lines is a k-stage task: stage j asks for output
lines a_j..b_j and its verifier checks that ``output.txt`` holds exactly the expected lines
1..b_j, so a stage that breaks earlier lines fails as a state defect would. A checkpoint trial of
stage j starts from the reference output of chunks 1..j−1 in a clean context; the natural rollout
writes the whole document in one history: the residual's two sides.

The expected lines ship with each stage's tests (``tests/expected.txt``): the verifier reads the
agent's output file and nothing else from the workspace, and never runs it.
"""

from __future__ import annotations

import itertools
import tomllib
from collections.abc import Sequence
from pathlib import Path

from hrbench.transduction.families import Document, generate

_OUTPUT_RULES = {
    "records": ("Write `/app/output.txt`: one output line per record as described, nothing else (no header or "
                "commentary; blank lines and surrounding spaces are ignored)."),
    "table": ("Write `/app/output.txt`: the resulting CSV table, header line first, nothing else (no commentary; "
              "blank lines and surrounding spaces are ignored)."),
}

_TEST_SH = """#!/bin/bash
source /tests/checks.sh
# expected lines ship with the tests; output.txt is read (non-blank lines, stripped), never executed
expect_file output /app/output.txt
# only a plain file is read: a symlink could point at expected.txt (/tests is mounted now), a FIFO would block
if [ -f /app/output.txt ] && [ ! -L /app/output.txt ]; then
    pass output_is_a_plain_file
    GOT="$(awk 'NF { sub(/^[ \\t]+/, ""); sub(/[ \\t\\r]+$/, ""); print }' /app/output.txt)"
    # the expected lines as $(cat) gives them (trailing newlines dropped), read without a process
    IFS= read -r -d '' EXP </tests/expected.txt
    expect_eq output_lines_1_to_{last} "$GOT" "${EXP%"${EXP##*[!$'\\n']}"}" exact
else
    fail output_is_a_plain_file "/app/output.txt is not a plain file"
    GOT=""
fi
# per-record scores of this part's lines (1 = line i equals expected line i), kept in reward.json
SCORES="$(awk -v a={first} -v b={last} 'NR == FNR { e[FNR] = $0; next }
    { g[FNR] = $0 } END { for (i = a; i <= b; i++) print i, ((i in g) && g[i] == e[i]) ? 1 : 0 }' /tests/expected.txt - <<<"$GOT")"
while read -r i ok; do
    [ -n "$i" ] || continue
    printf -v LINE 'line_%04d' "$i"
    subreward "$LINE" "$ok"
done <<<"$SCORES"
finish
"""


def chunk_bounds(n_lines: int, chunks: int) -> list[tuple[int, int]]:
    """1-based inclusive (first, last) output lines of each chunk, as even as possible."""
    if not 1 <= chunks <= n_lines:
        raise ValueError(f"cannot split {n_lines} output lines into {chunks} chunks")
    base, extra = divmod(n_lines, chunks)
    bounds, start = [], 1
    for j in range(chunks):
        size = base + (1 if j < extra else 0)
        bounds.append((start, start + size - 1))
        start += size
    return bounds


def _instruction(doc: Document, part: int, parts: int, first: int, last: int) -> str:
    total = len(doc.expected)
    unit = "output lines (the header line is line 1)" if doc.family == "table" else "output lines (one per record)"
    rules = _OUTPUT_RULES["table" if doc.family == "table" else "records"]
    scope = ("Write the whole output." if parts == 1 else
             f"This part asks for {unit} {first} to {last} of {total}. "
             + ("Create `/app/output.txt` with them." if first == 1 else
                f"Lines 1 to {first - 1} are already in `/app/output.txt`: keep them unchanged and append lines "
                f"{first} to {last}; write no line after {last}."))
    return (f"# Transduction: {doc.family.replace('_', ' ')} ({doc.format.replace('_', ' ')}, difficulty "
            f"{doc.difficulty})\n\n`/app/input.txt` holds the input. {doc.task}\n\n{rules}\n\n{scope}\n")


def _solve(lines: Sequence[str], append: bool) -> str:
    body = "".join(line + "\n" for line in lines)
    return (f"#!/bin/bash\ncd /app\n# hrbench:key-begin\ncat {'>>' if append else '>'} output.txt <<'HRB_EOF'\n"
            f"{body}HRB_EOF\n# hrbench:key-end\n")


def write_document_task(doc: Document, root: Path, chunks: int = 1) -> Path:
    """Write `doc` as a task package under `root` with `chunks` stages; returns its directory."""
    bounds = chunk_bounds(len(doc.expected), chunks)
    name = doc.name if chunks == 1 else f"{doc.name}-k{chunks}"
    task = Path(root) / name
    parts = [f"part{j}" for j in range(1, chunks + 1)]
    depends = "".join(f'{p} = ["{q}"]\n' for q, p in itertools.pairwise(parts))
    toml = (f'version = "1.0"\n\n[task]\nname = "{name}"\n'
            f'description = "Long transduction: {doc.family} / {doc.format} / difficulty {doc.difficulty}, '
            f'{doc.length} records in {chunks} part(s)."\n\n[metadata]\ncategory = "transduction"\n'
            f'difficulty = "d{doc.difficulty}"\n\n[metadata.hrbench]\nfamily = "transduction-{doc.family}"\n'
            f'structure = "{"deep" if chunks > 1 else "shallow"}"\n\n'
            f'[metadata.hrbench.transduction]\nfamily = "{doc.family}"\nformat = "{doc.format}"\n'
            f'difficulty = {doc.difficulty}\nlength = {doc.length}\nsample = {doc.sample}\nchunks = {chunks}\n\n'
            f'[metadata.hrbench.depends_on]\n{depends}\n'
            '[metadata.hrbench.weights]\n' + "".join(f"{p} = {b - a + 1}.0\n" for p, (a, b) in zip(parts, bounds))
            + '\n[environment]\nworkdir = "/app"\n\n[verifier]\ntimeout_sec = 60\n\n[agent]\ntimeout_sec = 120\n\n'
            + "".join(f'[[steps]]\nname = "{p}"\n\n' for p in parts).rstrip("\n") + "\n")
    files = {
        task / "task.toml": toml,
        task / "environment" / "Dockerfile": "FROM debian:bookworm-slim\nWORKDIR /app\nCOPY files/ /app/\n",
        task / "environment" / "files" / "input.txt": doc.input_text,
    }
    for j, (part, (first, last)) in enumerate(zip(parts, bounds), start=1):
        stage = task / "steps" / part
        files[stage / "instruction.md"] = _instruction(doc, j, chunks, first, last)
        files[stage / "solution" / "solve.sh"] = _solve(doc.expected[first - 1:last], append=first > 1)
        files[stage / "tests" / "test.sh"] = _TEST_SH.replace("{first}", str(first)).replace("{last}", str(last))
        files[stage / "tests" / "expected.txt"] = "".join(line + "\n" for line in doc.expected[:last])
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return task


def document_for_task(task_dir: Path) -> tuple[Document, int]:
    """The document a transduction task package was written from, and its number of chunks."""
    toml_path = Path(task_dir) / "task.toml"
    meta = tomllib.loads(toml_path.read_text()).get("metadata", {}).get("hrbench", {}).get("transduction")
    if not isinstance(meta, dict):
        raise ValueError(f"{toml_path}: no [metadata.hrbench.transduction] table; not a transduction task")  # noqa: TRY004
    try:
        doc = generate(meta["family"], meta["format"], int(meta["difficulty"]), int(meta["length"]),
                       int(meta.get("sample", 0)))
        return doc, int(meta.get("chunks", 1))
    except KeyError as exc:
        raise ValueError(f"{toml_path}: [metadata.hrbench.transduction] lacks {exc}") from exc


# The committed set: per family five documents over the three formats and the four difficulties.
REGISTRY_SET: tuple[tuple[str, str, int], ...] = (
    ("arithmetic", "ordered_ids", 1), ("arithmetic", "shuffled_ids", 2), ("arithmetic", "no_ids", 3),
    ("arithmetic", "ordered_ids", 4), ("arithmetic", "no_ids", 2),
    ("uuid_sort", "ordered_ids", 1), ("uuid_sort", "shuffled_ids", 2), ("uuid_sort", "no_ids", 3),
    ("uuid_sort", "shuffled_ids", 4), ("uuid_sort", "no_ids", 1),
    ("variable_lookup", "ordered_ids", 1), ("variable_lookup", "shuffled_ids", 2), ("variable_lookup", "no_ids", 3),
    ("variable_lookup", "no_ids", 4), ("variable_lookup", "ordered_ids", 2),
    ("table", "permute_int", 1), ("table", "permute_hex", 2), ("table", "kv_resolve", 3),
    ("table", "permute_int", 4), ("table", "kv_resolve", 1),
)
REGISTRY_LENGTH = 12
# Each document is committed twice: in two parts (for accuracy by output position and depth) and in four
# (three lines a part; the demo's four-stage transduction tasks, whose residual under context rot is as
# large as a four-stage workflow task's, at a third of the verifier cost).
REGISTRY_CHUNKS: tuple[int, ...] = (2, 4)


def write_registry_set(root: Path, length: int = REGISTRY_LENGTH,
                       chunks: tuple[int, ...] = REGISTRY_CHUNKS) -> list[Path]:
    """Write the committed transduction tasks under `root` (deterministic), each document once per
    entry of `chunks`."""
    return [write_document_task(generate(fam, fmt, d, length), root, k)
            for k in chunks for fam, fmt, d in REGISTRY_SET]
