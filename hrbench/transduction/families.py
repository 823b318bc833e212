"""Long-transduction documents (long-transduction paper §2, Appendix A): read, mutate, output.

Four families hold the local operation simple and let horizon grow with the number of records:

* ``arithmetic``: evaluate an addition/subtraction expression of 2, 4, 8 or 16 operands per record;
* ``uuid_sort``: sort a list of 2, 4, 8 or 16 UUIDs per record;
* ``variable_lookup``: resolve ``adjkey+nounkey`` against a definition pool of 8, 32, 128 or 256
  entries (half adjectives, half nouns) into ``adjective noun``;
* ``table``: transform a CSV table, by permuting 20/40/80/100 % of its rows and columns (cells of
  four-digit integers, or of hex fragments 1-36 digits long), or by resolving every cell
  ``aK+nK`` against adjective and noun tables of 2/5/10/19 active variables (Table 1, first row).

The first three come in three input formats: ``ordered_ids`` (records ``[i]…`` in order),
``shuffled_ids`` (the same lines shuffled; the output must be in increasing ID) and ``no_ids``
(bare records; the output follows the input order). The table family's three variants play the
role of formats: ``permute_int``, ``permute_hex`` and ``kv_resolve``.

A document is fully determined by (family, format, difficulty, length, sample): its seed is a
SHA-256 of those, so the same parameters give byte-identical input and expected output anywhere.
"""

from __future__ import annotations

import hashlib
import math
import random
import uuid
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Family = Literal["arithmetic", "uuid_sort", "variable_lookup", "table"]
FAMILIES: tuple[Family, ...] = ("arithmetic", "uuid_sort", "variable_lookup", "table")
RECORD_FORMATS = ("ordered_ids", "shuffled_ids", "no_ids")
TABLE_FORMATS = ("permute_int", "permute_hex", "kv_resolve")
DIFFICULTIES = (1, 2, 3, 4)
OPERANDS = {1: 2, 2: 4, 3: 8, 4: 16}
UUIDS_PER_RECORD = {1: 2, 2: 4, 3: 8, 4: 16}
POOL_SIZE = {1: 8, 2: 32, 3: 128, 4: 256}
PERMUTED_SHARE = {1: 0.2, 2: 0.4, 3: 0.8, 4: 1.0}
KV_VARIABLES = {1: 2, 2: 5, 3: 10, 4: 19}
TABLE_COLUMNS = 5

_ONSETS = ["b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z"]
_VOWELS = ["a", "e", "i", "o", "u"]


def formats_for(family: Family) -> tuple[str, ...]:
    """The three input formats (table: the three transformation variants) of a family."""
    return TABLE_FORMATS if family == "table" else RECORD_FORMATS


class Document(BaseModel):
    """One transduction document: its input, what to do, and the exact expected output lines."""

    model_config = ConfigDict(frozen=True)
    family: Family
    format: str
    difficulty: int = Field(ge=1, le=4)
    length: int = Field(ge=1, description="records to transform (table: data rows)")
    sample: int = 0
    task: str  # the operation, stated to the agent
    input_text: str
    expected: tuple[str, ...]  # output lines in required order (table: header first)
    # what self-consistency needs to know about a record without knowing which one it is
    items_per_record: int = 0
    adjectives: tuple[str, ...] = ()
    nouns: tuple[str, ...] = ()
    row_labels: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        fam = {"arithmetic": "arith", "uuid_sort": "uuid", "variable_lookup": "lookup", "table": "table"}
        return f"lt-{fam[self.family]}-{self.format.replace('_', '')}-d{self.difficulty}-n{self.length}-s{self.sample}"

    @property
    def has_ids(self) -> bool:
        return self.format in ("ordered_ids", "shuffled_ids")


def document_seed(family: str, fmt: str, difficulty: int, length: int, sample: int) -> int:
    """A seed from the parameters alone (stable across Python versions and processes)."""
    key = f"{family}|{fmt}|{difficulty}|{length}|{sample}".encode()
    return int.from_bytes(hashlib.sha256(key).digest()[:8], "big")


def _word(rng: random.Random, used: set[str]) -> str:
    while True:
        w = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) for _ in range(rng.randint(2, 3)))
        if w not in used:
            used.add(w)
            return w


def random_uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _records(family: Family, rng: random.Random, difficulty: int, length: int) -> tuple[list[str], list[str], dict]:
    """(records, answers, context) for the record families."""
    if family == "arithmetic":
        records, answers = [], []
        for _ in range(length):
            nums = [rng.randint(1, 99) for _ in range(OPERANDS[difficulty])]
            signs = [rng.choice("+-") for _ in nums[1:]]
            records.append(str(nums[0]) + "".join(s + str(n) for s, n in zip(signs, nums[1:])))
            answers.append(str(nums[0] + sum(n if s == "+" else -n for s, n in zip(signs, nums[1:]))))
        return records, answers, {}
    if family == "uuid_sort":
        d = UUIDS_PER_RECORD[difficulty]
        lists = [[random_uuid(rng) for _ in range(d)] for _ in range(length)]
        return [",".join(x) for x in lists], [",".join(sorted(x)) for x in lists], {"items_per_record": d}
    # variable lookup: a pool of keyed adjectives and nouns, records pair one of each
    half = POOL_SIZE[difficulty] // 2
    keys = rng.sample(range(16**3), 2 * half)
    used: set[str] = set()
    adjectives = {f"{k:03x}": _word(rng, used) for k in keys[:half]}
    nouns = {f"{k:03x}": _word(rng, used) for k in keys[half:]}
    pairs = [(rng.choice(list(adjectives)), rng.choice(list(nouns))) for _ in range(length)]
    pool = [f"{k}={v}" for k, v in list(adjectives.items()) + list(nouns.items())]
    rng.shuffle(pool)
    return ([f"{a}+{n}" for a, n in pairs], [f"{adjectives[a]} {nouns[n]}" for a, n in pairs],
            {"pool": pool, "adjectives": tuple(sorted(adjectives.values())), "nouns": tuple(sorted(nouns.values()))})


_RECORD_TASK = {
    "arithmetic": "evaluate the addition/subtraction expression and write its integer value",
    "uuid_sort": "sort the comma-separated UUIDs in ascending (lexicographic) order and write them comma-separated",
    "variable_lookup": ("resolve `ADJKEY+NOUNKEY` with the definitions (`key=word`) and write the two words, "
                        "adjective first, separated by one space"),
}
_FORMAT_TASK = {
    "ordered_ids": "Each record line reads `[ID]RECORD`. Write one line `[ID]ANSWER` per record, in the same order.",
    "shuffled_ids": ("Each record line reads `[ID]RECORD`; the lines are not in ID order. Write one line "
                     "`[ID]ANSWER` per record, in increasing ID order."),
    "no_ids": "Each record line is one record. Write one answer line per record, in the same order as the records.",
}


def _record_document(family: Family, fmt: str, difficulty: int, length: int, sample: int,
                     rng: random.Random) -> Document:
    records, answers, ctx = _records(family, rng, difficulty, length)
    ids = list(range(1, length + 1))
    if fmt == "no_ids":
        lines, expected = records, answers
    else:
        lines = [f"[{i}]{r}" for i, r in zip(ids, records)]
        expected = [f"[{i}]{a}" for i, a in zip(ids, answers)]
        if fmt == "shuffled_ids":
            rng.shuffle(lines)
    head = ""
    if family == "variable_lookup":
        head = "definitions:\n" + "".join(p + "\n" for p in ctx["pool"]) + "\n"
    text = head + "records:\n" + "".join(line + "\n" for line in lines)
    task = f"For every record, {_RECORD_TASK[family]}. {_FORMAT_TASK[fmt]}"
    return Document(family=family, format=fmt, difficulty=difficulty, length=length, sample=sample, task=task,
                    input_text=text, expected=tuple(expected), items_per_record=ctx.get("items_per_record", 0),
                    adjectives=ctx.get("adjectives", ()), nouns=ctx.get("nouns", ()))


def _partial_permutation(rng: random.Random, n: int, share: float) -> list[int]:
    """A reordering of range(n) that moves ceil(share * n) chosen positions among themselves."""
    order = list(range(n))
    chosen = sorted(rng.sample(range(n), min(n, max(2, math.ceil(share * n))))) if n > 1 else []
    moved = chosen[:]
    while len(moved) > 1 and moved == chosen:  # the chosen positions really change places
        rng.shuffle(moved)
    for pos, src in zip(chosen, moved):
        order[pos] = src
    return order


def _csv(rows: list[list[str]]) -> list[str]:
    return [",".join(r) for r in rows]


def _table_document(fmt: str, difficulty: int, length: int, sample: int, rng: random.Random) -> Document:
    cols = [f"[C{j}]" for j in range(TABLE_COLUMNS)]
    labels = [f"[R{i}]" for i in range(length)]
    if fmt == "kv_resolve":
        used: set[str] = set()
        n_var = KV_VARIABLES[difficulty]
        adj = {f"a{k}": _word(rng, used) for k in range(n_var)}
        noun = {f"n{k}": _word(rng, used) for k in range(n_var)}
        cells = [[f"{rng.choice(list(adj))}+{rng.choice(list(noun))}" for _ in cols] for _ in labels]
        resolved = [[f"{adj[c.split('+')[0]]} {noun[c.split('+')[1]]}" for c in row] for row in cells]
        table = _csv([[""] + cols] + [[lab] + row for lab, row in zip(labels, cells)])
        expected = _csv([[""] + cols] + [[lab] + row for lab, row in zip(labels, resolved)])
        defs = "".join(f"{k}={v}\n" for k, v in list(adj.items()) + list(noun.items()))
        text = f"definitions:\n{defs}\ntable:\n" + "".join(line + "\n" for line in table)
        task = ("Replace every cell `aK+nK` of the CSV table with the adjective and the noun it names "
                "(`adjective noun`, one space), keeping the header, the row labels and the order of rows and "
                "columns. Write the resulting CSV table.")
        return Document(family="table", format=fmt, difficulty=difficulty, length=length, sample=sample, task=task,
                        input_text=text, expected=tuple(expected), adjectives=tuple(sorted(adj.values())),
                        nouns=tuple(sorted(noun.values())), row_labels=tuple(labels))
    if fmt == "permute_int":
        cells = [[f"{rng.randint(1000, 9999)}" for _ in cols] for _ in labels]
    else:
        cells = [[f"{rng.getrandbits(144):036x}"[: rng.randint(1, 36)] for _ in cols] for _ in labels]
    row_order = _partial_permutation(rng, length, PERMUTED_SHARE[difficulty])
    col_order = _partial_permutation(rng, TABLE_COLUMNS, PERMUTED_SHARE[difficulty])
    table = _csv([[""] + cols] + [[lab] + row for lab, row in zip(labels, cells)])
    expected = _csv([[""] + [cols[j] for j in col_order]]
                    + [[labels[i]] + [cells[i][j] for j in col_order] for i in row_order])
    text = ("row order: " + ",".join(labels[i] for i in row_order) + "\n"
            "column order: " + ",".join(cols[j] for j in col_order) + "\n\ntable:\n"
            + "".join(line + "\n" for line in table))
    task = ("Reorder the rows and the columns of the CSV table as `row order` and `column order` say (the header "
            "row, with an empty first cell, stays first; every row keeps its label in the first column). Write the "
            "resulting CSV table.")
    return Document(family="table", format=fmt, difficulty=difficulty, length=length, sample=sample, task=task,
                    input_text=text, expected=tuple(expected), row_labels=tuple(labels))


def generate(family: Family, fmt: str, difficulty: int, length: int, sample: int = 0) -> Document:
    """The document with these parameters (deterministic)."""
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}; choose one of {FAMILIES}")
    if fmt not in formats_for(family):
        raise ValueError(f"family {family!r} has formats {formats_for(family)}, not {fmt!r}")
    if difficulty not in DIFFICULTIES:
        raise ValueError(f"difficulty must be one of {DIFFICULTIES}, got {difficulty}")
    if length < 1:
        raise ValueError(f"length must be at least 1 record, got {length}")
    rng = random.Random(document_seed(family, fmt, difficulty, length, sample))
    if family == "table":
        return _table_document(fmt, difficulty, length, sample, rng)
    return _record_document(family, fmt, difficulty, length, sample, rng)


# The paper's nominal input-plus-output horizons (tokens); a document of horizon H has about H/2
# input and H/2 output tokens. Tokens are estimated as characters / 4 (no tokenizer is needed).
NOMINAL_HORIZONS = (4096, 8192, 16384, 32768, 65536, 131072)
CHARS_PER_TOKEN = 4.0
_PROBE_RECORDS = 32


def nominal_tokens(doc: Document) -> float:
    """Estimated input-plus-output tokens of a document: characters of input and expected output / 4."""
    return (len(doc.input_text) + sum(len(line) + 1 for line in doc.expected)) / CHARS_PER_TOKEN


def length_for_horizon(family: Family, fmt: str, difficulty: int, horizon_tokens: int) -> int:
    """The record count whose document is closest to `horizon_tokens` nominal tokens.

    Per-record size is measured on a probe document after removing the fixed part (the definition
    pool of variable lookup), then refined twice at the estimate, since IDs grow with the count; the
    closest candidate is kept. Word lengths differ between documents (each length has its own seed),
    so a document with few distinct words can land some 10-15 % off the horizon.
    """
    small, probe = generate(family, fmt, difficulty, 1), generate(family, fmt, difficulty, _PROBE_RECORDS + 1)
    per_record = (nominal_tokens(probe) - nominal_tokens(small)) / _PROBE_RECORDS
    fixed = nominal_tokens(small) - per_record
    n = max(1, round((horizon_tokens - fixed) / per_record))
    tried: dict[int, float] = {}
    for _ in range(3):
        tried[n] = nominal_tokens(generate(family, fmt, difficulty, n))
        n = max(1, round((horizon_tokens - fixed) * n / (tried[n] - fixed)))
    return min(tried, key=lambda k: abs(tried[k] - horizon_tokens))
