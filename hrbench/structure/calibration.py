"""Appendix B's calibration tasks: can a model merge commands into fewer turns once told the cap?

Every step is solved by one short command; the three tasks differ only in what a batch may skip:

* ``calib-parallel``: ten independent steps, listed in one file (``steps.txt``);
* ``calib-static-chain``: each step needs the previous answer, but every step is in a plain file
  from the start, so a script can follow the chain in one turn;
* ``calib-encrypted-chain`` (the control): the instruction and data of each step are encrypted
  with the answer to the previous step, so no batch can write step k+1 before reading step k.

An agent that batches freely needs 1 turn on the first two and one turn per step on the third;
one that works a step per turn needs one turn per step on all three. The solutions mark their
steps (``# hrbench:step``, ``reads-output`` where merging is impossible; see
:mod:`hrbench.structure.batching`). Packages are written by :func:`write_calibration_tasks`
from a seed, byte-identically; the expected answers ship with the tests (``tests/expected.txt``).
"""

from __future__ import annotations

import random
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

N_STEPS = 10
CALIBRATION_TASKS = ("calib-parallel", "calib-static-chain", "calib-encrypted-chain")
_WORDS = ("amber", "birch", "cedar", "delta", "ember", "fjord", "garnet", "harbor")
_CIPHER = ("enc", "-aes-256-cbc", "-pbkdf2")
_STAGE = "answers"


@dataclass(frozen=True)
class _Question:
    text: str  # the question about data lines `WORD NUMBER`
    command: str  # a pipeline reading the data lines on stdin and printing the answer
    answer: str


def _data_lines(rng: random.Random, n: int = 24) -> list[tuple[str, int]]:
    return [(rng.choice(_WORDS), rng.randint(1, 99)) for _ in range(n)]


def _question(rng: random.Random, rows: list[tuple[str, int]]) -> _Question:
    """One question from a small vocabulary, so that the next one cannot be guessed in advance."""
    kind = rng.randrange(5)
    word = rng.choice([w for w, _ in rows])
    if kind == 0:
        return _Question(f"How many data lines have the word `{word}`?",
                         f"awk '$1 == \"{word}\"' | wc -l", str(sum(w == word for w, _ in rows)))
    if kind == 1:
        return _Question(f"What is the sum of the numbers on the data lines with the word `{word}`?",
                         f"awk '$1 == \"{word}\" {{ s += $2 }} END {{ print s }}'",
                         str(sum(v for w, v in rows if w == word)))
    if kind == 2:
        return _Question("What is the largest number on any data line?",
                         "awk '{ print $2 }' | sort -n | tail -n 1", str(max(v for _, v in rows)))
    if kind == 3:
        return _Question("How many different words appear on the data lines?",
                         "awk '{ print $1 }' | sort -u | wc -l", str(len({w for w, _ in rows})))
    line = rng.randint(1, len(rows))
    return _Question(f"Which word is on data line {line}?", f"sed -n '{line}p' | awk '{{ print $1 }}'",
                     rows[line - 1][0])


def _rows_text(rows: list[tuple[str, int]]) -> str:
    return "".join(f"{w} {v}\n" for w, v in rows)


def _answer_line(k: int, pipeline: str) -> str:
    return f'echo "step{k}: $({pipeline})" >> answers.txt\n'


def _previous(k: int) -> str:
    return f"$(sed -n 's/^step{k - 1}: //p' answers.txt)"


_ANSWER_FORMAT = ("Write the answer of every step to `/app/answers.txt`, one line per step in the form "
                  "`stepN: ANSWER` (for example `step3: 42`).")


def _parallel(rng: random.Random) -> tuple[str, dict[str, str], str, list[str]]:
    files, listing, solve, answers = {}, [], ["#!/bin/bash\ncd /app\n"], []
    for k in range(1, N_STEPS + 1):
        rows = _data_lines(rng)
        q = _question(rng, rows)
        files[f"data/s{k:02d}.txt"] = _rows_text(rows)
        listing.append(f"step{k}: data/s{k:02d}.txt -- {q.text}\n")
        solve.append("# hrbench:step\n" + _key(k, _answer_line(k, f"< data/s{k:02d}.txt {q.command}")))
        answers.append(q.answer)
    files["steps.txt"] = "".join(listing)
    instruction = (
        "# Ten independent questions\n\n"
        f"`/app/steps.txt` lists {N_STEPS} steps. Each names a data file under `/app/data/` whose lines "
        "read `WORD NUMBER`, and asks one question about those lines. The steps do not depend on each "
        f"other.\n\n{_ANSWER_FORMAT}\n")
    return instruction, files, "".join(solve), answers


def _static_chain(rng: random.Random) -> tuple[str, dict[str, str], str, list[str]]:
    files, solve, answers = {}, ["#!/bin/bash\ncd /app\n"], []
    key = f"{rng.getrandbits(24):06x}"
    start = key
    for k in range(1, N_STEPS + 1):
        value = f"{rng.getrandbits(24):06x}"
        rows = [(f"{rng.getrandbits(24):06x}", f"{rng.getrandbits(24):06x}") for _ in range(23)]
        rows = [r for r in rows if r[0] != key]
        rows.insert(rng.randint(0, len(rows)), (key, value))
        files[f"chain/s{k:02d}.txt"] = "".join(f"{a} {b}\n" for a, b in rows)
        source = start if k == 1 else _previous(k)
        solve.append("# hrbench:step\n" + _key(k, _answer_line(k, f"awk -v k=\"{source}\" '$1 == k {{ print $2 }}' "
                                                                  f"chain/s{k:02d}.txt")))
        answers.append(value)
        key = value
    instruction = (
        f"# A chain of {N_STEPS} lookups\n\n"
        f"Each file `/app/chain/sNN.txt` (NN = 01 to {N_STEPS:02d}) has lines `KEY VALUE`. The answer to "
        f"step 1 is the VALUE of the line of `chain/s01.txt` whose KEY is `{start}`. For every later step N, "
        "the answer is the VALUE of the line of `chain/sNN.txt` whose KEY is the answer to step N-1.\n\n"
        f"{_ANSWER_FORMAT}\n")
    return instruction, files, "".join(solve), answers


def _encrypt(plain: str, password: str, salt: str) -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "plain.txt"
        source.write_text(plain)
        body = subprocess.run(["openssl", *_CIPHER, "-S", salt, "-pass", f"pass:{password}", "-in", str(source)],
                              capture_output=True, check=True).stdout
    # OpenSSL 3 omits the salt header when -S is given; write it so that a plain `openssl enc -d` works
    return b"Salted__" + bytes.fromhex(salt) + body


def _decrypt_command(k: int) -> str:
    return f"openssl {' '.join(_CIPHER)} -d -pass \"pass:{_previous(k)}\" -in steps/{k:02d}.enc"


def _encrypted_chain(rng: random.Random) -> tuple[str, dict[str, str | bytes], str, list[str]]:
    files: dict[str, str | bytes] = {}
    solve, answers = ["#!/bin/bash\ncd /app\n"], []
    questions = []
    for _ in range(N_STEPS):
        rows = _data_lines(rng)
        questions.append((rows, _question(rng, rows)))
    for k, (rows, q) in enumerate(questions, start=1):
        last = k == N_STEPS
        follow = ("This is the last step." if last else
                  f"Your answer is also the password of the next step: decrypt it with\n\n"
                  f"    openssl {' '.join(_CIPHER)} -d -pass pass:ANSWER -in /app/steps/{k + 1:02d}.enc\n")
        text = (f"Step {k} of {N_STEPS}. {q.text}\nWrite the answer to /app/answers.txt as the line "
                f"`step{k}: ANSWER`. {follow}\ndata:\n{_rows_text(rows)}")
        if k == 1:
            files["steps/01.txt"] = text
        else:
            files[f"steps/{k:02d}.enc"] = _encrypt(text, answers[-1], f"{rng.getrandbits(64):016x}")
        # step k is answered only after it was read; reading step k+1 needs that answer, so a turn ends there
        answer = _key(k, _answer_line(k, f"sed '1,/^data:$/d' steps/{k:02d}.txt | {q.command}"))
        show_next = "" if last else f"{_decrypt_command(k + 1)} > steps/{k + 1:02d}.txt\ncat steps/{k + 1:02d}.txt\n"
        head = "# hrbench:step\ncat steps/01.txt\n" if k == 1 else "# hrbench:step reads-output\n"
        solve.append(head + answer + show_next)
        answers.append(q.answer)
    instruction = (
        f"# An encrypted chain of {N_STEPS} steps\n\n"
        "`/app/steps/01.txt` holds the first step: a question and its data lines (`WORD NUMBER`, after the "
        "line `data:`). The answer to each step is the password that decrypts the next one, "
        f"`/app/steps/NN.enc`, with `openssl {' '.join(_CIPHER)} -d`.\n\n{_ANSWER_FORMAT}\n")
    return instruction, files, "".join(solve), answers


def _key(k: int, line: str) -> str:
    """The last step's answer is the key step: without it the verifier must fail."""
    return f"# hrbench:key-begin\n{line}# hrbench:key-end\n" if k == N_STEPS else line


_TEST_SH = """#!/bin/bash
source /tests/checks.sh
# expected answers ship with the tests (expected.txt); nothing is read back from the workspace but the answers
expect_file answers /app/answers.txt
# only a plain file is read: a symlink could point at expected.txt (/tests is mounted now), a FIFO would block
if [ -f /app/answers.txt ] && [ ! -L /app/answers.txt ]; then
    pass answers_is_a_plain_file
    for k in $(seq 1 {n}); do
        expect_eq "step$k" "$(field /app/answers.txt "step$k")" "$(field /tests/expected.txt "step$k")" exact
    done
else
    fail answers_is_a_plain_file "/app/answers.txt is not a plain file"
fi
finish
"""

_DESCRIPTIONS = {
    "calib-parallel": "Calibration (depth App. B): ten independent one-command questions listed in one file.",
    "calib-static-chain": "Calibration (depth App. B): ten chained lookups, every step in a plain file.",
    "calib-encrypted-chain": "Calibration (depth App. B): ten steps, each encrypted with the previous answer.",
}


def _task_toml(name: str) -> str:
    return f"""version = "1.0"

[task]
name = "{name}"
description = "{_DESCRIPTIONS[name]}"

[metadata]
category = "calibration"
difficulty = "easy"

[metadata.hrbench]
family = "calibration"
structure = "shallow"

[environment]
workdir = "/app"

[verifier]
timeout_sec = 60

[agent]
timeout_sec = 120

[[steps]]
name = "{_STAGE}"
"""


def _write(path: Path, content: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)


def write_calibration_tasks(root: Path, seed: int = 20261201) -> list[Path]:
    """Write the three calibration task packages under `root`; the same seed gives the same bytes."""
    builders = {"calib-parallel": _parallel, "calib-static-chain": _static_chain,
                "calib-encrypted-chain": _encrypted_chain}
    written = []
    for offset, (name, build) in enumerate(builders.items()):
        instruction, files, solve, answers = build(random.Random(seed + offset))
        task = Path(root) / name
        _write(task / "task.toml", _task_toml(name))
        packages = "python3 openssl" if name == "calib-encrypted-chain" else "python3"
        _write(task / "environment" / "Dockerfile",
               "FROM debian:bookworm-slim\nRUN apt-get update && apt-get install -y --no-install-recommends "
               f"{packages} && rm -rf /var/lib/apt/lists/*\nWORKDIR /app\nCOPY files/ /app/\n")
        for rel, content in files.items():
            _write(task / "environment" / "files" / rel, content)
        stage = task / "steps" / _STAGE
        _write(stage / "instruction.md", instruction)
        _write(stage / "solution" / "solve.sh", solve)
        _write(stage / "tests" / "test.sh", _TEST_SH.replace("{n}", str(N_STEPS)))
        _write(stage / "tests" / "expected.txt", "".join(f"step{k}: {a}\n" for k, a in enumerate(answers, 1)))
        written.append(task)
    return written
