"""Exact per-record and position-resolved scoring of transduction outputs (paper §2, §4).

An output is read as its non-blank lines, each stripped of surrounding blanks (the verifier reads
it the same way). Record i (0-based output position) is correct iff output line i equals expected
line i exactly, so an omitted or extra line shifts every later record: the failure the no-ID format
provokes. For the ID formats the ID-matched accuracy (the line carrying record i's ID, wherever it
is, has the right answer) is reported beside it to tell a shift from a wrong answer.

* item accuracy of a document = correct records / required records;
* exact completion = every record correct and no extra line (the document needs no repair);
* self-consistency of a record = its line is a well-formed answer of the family whatever the input
  (an integer; d UUIDs in sorted order; an adjective and a noun of the pool; a table row with a
  valid label and well-formed cells), so a model that "understands the task but reads the wrong
  record" is consistent but not correct;
* accuracy by output position pools records of many documents by relative position i / n.

The document is the independent unit: intervals on accuracy are over documents.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict

from hrbench.stats.dense import mean_reward
from hrbench.stats.intervals import wilson_interval
from hrbench.transduction.families import TABLE_COLUMNS, Document

ID_LINE = re.compile(r"^\[(\d+)\](.*)$")
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_INT = re.compile(r"^-?\d+$")


def output_lines(text: str) -> list[str]:
    """The non-blank lines of an output, stripped (as the verifier compares them)."""
    return [line.strip() for line in text.splitlines() if line.strip()]


class DocumentScore(BaseModel):
    model_config = ConfigDict(frozen=True)
    document: str
    family: str
    format: str
    difficulty: int
    n_records: int
    correct: tuple[bool, ...]  # by expected output position
    consistent: tuple[bool, ...]
    missing: int
    extra: int
    id_accuracy: float | None  # ID formats only

    @property
    def accuracy(self) -> float:
        return sum(self.correct) / self.n_records

    @property
    def self_consistency(self) -> float:
        return sum(self.consistent) / self.n_records

    @property
    def exact(self) -> bool:
        return all(self.correct) and self.extra == 0


def _answer_part(doc: Document, line: str) -> str | None:
    if not doc.has_ids:
        return line
    m = ID_LINE.match(line)
    return m.group(2) if m else None


def is_self_consistent(doc: Document, line: str, position: int) -> bool:
    """Is `line` a well-formed answer of the document's family at this output position?"""
    answer = _answer_part(doc, line)
    if answer is None:
        return False
    if doc.family == "arithmetic":
        return bool(_INT.match(answer))
    if doc.family == "uuid_sort":
        items = answer.split(",")
        return len(items) == doc.items_per_record and all(_UUID.match(x) for x in items) and items == sorted(items)
    if doc.family == "variable_lookup":
        words = answer.split(" ")
        return len(words) == 2 and words[0] in doc.adjectives and words[1] in doc.nouns
    fields = answer.split(",")
    if len(fields) != TABLE_COLUMNS + 1:
        return False
    if position == 0:
        return fields[0] == "" and sorted(fields[1:]) == sorted(f"[C{j}]" for j in range(TABLE_COLUMNS))
    if fields[0] not in doc.row_labels:
        return False
    if doc.format == "kv_resolve":
        return all(len(c.split(" ")) == 2 and c.split(" ")[0] in doc.adjectives and c.split(" ")[1] in doc.nouns
                   for c in fields[1:])
    cell = re.compile(r"^\d{4}$" if doc.format == "permute_int" else r"^[0-9a-f]{1,36}$")
    return all(cell.match(c) for c in fields[1:])


def score_document(doc: Document, output_text: str) -> DocumentScore:
    """Exact per-record scores of one output against the document's expected lines."""
    got = output_lines(output_text)
    expected = doc.expected
    n = len(expected)
    correct = tuple(i < len(got) and got[i] == expected[i] for i in range(n))
    consistent = tuple(i < len(got) and is_self_consistent(doc, got[i], i) for i in range(n))
    id_acc = None
    if doc.has_ids:
        by_id: dict[str, str] = {}
        for line in got:
            m = ID_LINE.match(line)
            if m:
                by_id.setdefault(m.group(1), line)
        id_acc = sum(by_id.get(ID_LINE.match(e).group(1)) == e for e in expected) / n
    return DocumentScore(document=doc.name, family=doc.family, format=doc.format, difficulty=doc.difficulty,
                         n_records=n, correct=correct, consistent=consistent, missing=max(0, n - len(got)),
                         extra=max(0, len(got) - n), id_accuracy=id_acc)


class AccuracySummary(BaseModel):
    """Accuracy over documents (mean of per-document accuracies) with its interval, and exact completion."""

    model_config = ConfigDict(frozen=True)
    n_documents: int
    accuracy: float
    ci_low: float
    ci_high: float
    cell_weighted_accuracy: float  # every (family, difficulty) cell weighs the same (paper §2)
    self_consistency: float
    exact: int
    exact_rate: float
    exact_ci_low: float
    exact_ci_high: float


def summarize(scores: Sequence[DocumentScore], level: float = 0.95) -> AccuracySummary:
    """Document-level accuracy (Student-t interval over documents) and exact completion (Wilson)."""
    if not scores:
        raise ValueError("no document scores to summarize")
    acc = mean_reward([s.accuracy for s in scores], level)
    cells: dict[tuple[str, int], list[float]] = {}
    for s in scores:
        cells.setdefault((s.family, s.difficulty), []).append(s.accuracy)
    exact = sum(s.exact for s in scores)
    low, high = wilson_interval(exact, len(scores), level)
    return AccuracySummary(
        n_documents=len(scores), accuracy=acc.mean, ci_low=acc.ci_low, ci_high=acc.ci_high,
        cell_weighted_accuracy=float(np.mean([np.mean(v) for v in cells.values()])),
        self_consistency=float(np.mean([s.self_consistency for s in scores])),
        exact=exact, exact_rate=exact / len(scores), exact_ci_low=low, exact_ci_high=high)


class PositionCurve(BaseModel):
    """Accuracy by relative output position, records pooled over documents, Wilson interval per bin."""

    model_config = ConfigDict(frozen=True)
    bin_low: tuple[float, ...]
    bin_high: tuple[float, ...]
    k: tuple[int, ...]
    n: tuple[int, ...]
    accuracy: tuple[float, ...]
    ci_low: tuple[float, ...]
    ci_high: tuple[float, ...]


def accuracy_by_position(correct: Sequence[Sequence[bool]], bins: int = 10, level: float = 0.95) -> PositionCurve:
    """Pool record i of an n-record document into bin floor(bins * i / n)."""
    if bins < 1:
        raise ValueError(f"bins must be >= 1, got {bins}")
    k, n = np.zeros(bins, dtype=int), np.zeros(bins, dtype=int)
    for doc in correct:
        flags = np.asarray(doc, dtype=bool)
        idx = (np.arange(flags.size) * bins) // max(1, flags.size)
        np.add.at(n, idx, 1)
        np.add.at(k, idx, flags.astype(int))
    intervals = [wilson_interval(int(a), int(b), level) for a, b in zip(k, n)]
    return PositionCurve(
        bin_low=tuple(i / bins for i in range(bins)), bin_high=tuple((i + 1) / bins for i in range(bins)),
        k=tuple(int(x) for x in k), n=tuple(int(x) for x in n),
        accuracy=tuple(float(a / b) if b else math.nan for a, b in zip(k, n)),
        ci_low=tuple(lo for lo, _ in intervals), ci_high=tuple(hi for _, hi in intervals))
