"""A simulated transducer with declared error behaviour, to check that scoring recovers it.

Record i of n (0-based) is wrong with probability

    e(i) = error_rate + decay * i / (n − 1)        (clipped to [0, 1])

so ``decay = 0`` is a flat per-record error rate and ``decay > 0`` a model that drifts as it writes.
A wrong record keeps its line (and ID) but carries a plausible wrong answer that is still
self-consistent (off by one; another UUID sorted in; another noun of the pool; two cells swapped):
the paper's "understands the task, reads the wrong record". ``omit_rate`` drops lines instead,
shifting every later position.
"""

from __future__ import annotations

import random

from hrbench.transduction.families import Document, random_uuid
from hrbench.transduction.scoring import ID_LINE


def _wrong(doc: Document, line: str, position: int, rng: random.Random) -> str:
    prefix, answer = "", line
    m = ID_LINE.match(line) if doc.has_ids else None
    if m:
        prefix, answer = f"[{m.group(1)}]", m.group(2)
    if doc.family == "arithmetic":
        wrong = str(int(answer) + rng.choice((-1, 1)))
    elif doc.family == "uuid_sort":
        items = answer.split(",")
        items[rng.randrange(len(items))] = random_uuid(rng)
        wrong = ",".join(sorted(items))
    elif doc.family == "variable_lookup":
        adj, noun = answer.split(" ")
        others = [n for n in doc.nouns if n != noun]
        wrong = f"{adj} {rng.choice(others)}" if others else answer + "x"
    else:
        fields = answer.split(",")
        a, b = rng.sample(range(1, len(fields)), 2)
        fields[a], fields[b] = fields[b], fields[a]
        wrong = ",".join(fields)
    if wrong == answer:  # two equal cells swapped: change a character so the record really is wrong
        wrong = answer[:-1] + ("0" if answer[-1] != "0" else "1") if doc.format != "kv_resolve" else answer + "x"
    return prefix + wrong


def simulated_records(doc: Document, rng: random.Random, error_rate: float = 0.0, decay: float = 0.0,
                      omit_rate: float = 0.0) -> list[str | None]:
    """The simulated line for each expected output position (None where the line is omitted)."""
    n = len(doc.expected)
    records: list[str | None] = []
    for i, line in enumerate(doc.expected):
        p = min(1.0, max(0.0, error_rate + (decay * i / (n - 1) if n > 1 else 0.0)))
        wrong = rng.random() < p
        omit = rng.random() < omit_rate  # both draws every record: the stream does not depend on outcomes
        records.append(None if omit else (_wrong(doc, line, i, rng) if wrong else line))
    return records


def simulated_output(doc: Document, rng: random.Random, error_rate: float = 0.0, decay: float = 0.0,
                     omit_rate: float = 0.0) -> str:
    """An output text for `doc` with the declared per-record error and omission behaviour."""
    records = simulated_records(doc, rng, error_rate, decay, omit_rate)
    return "".join(line + "\n" for line in records if line is not None)
