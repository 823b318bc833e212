"""Protects the long-transduction families: reproducible generation, correct expected outputs,
exact per-record and positional scoring on hand-computed cases, and recovery of a simulated
transducer's declared error behaviour."""

from __future__ import annotations

import random
import re

import numpy as np
import pytest

from hrbench.transduction.families import (
    DIFFICULTIES,
    FAMILIES,
    OPERANDS,
    POOL_SIZE,
    UUIDS_PER_RECORD,
    Document,
    formats_for,
    generate,
)
from hrbench.transduction.scoring import (
    accuracy_by_position,
    is_self_consistent,
    score_document,
    summarize,
)
from hrbench.transduction.simulate import simulated_output

ALL = [(f, fmt, d) for f in FAMILIES for fmt in formats_for(f) for d in DIFFICULTIES]


@pytest.mark.parametrize("family, fmt, difficulty", ALL)
def test_same_parameters_give_byte_identical_documents(family, fmt, difficulty):
    a, b = generate(family, fmt, difficulty, 9), generate(family, fmt, difficulty, 9)
    assert a.model_dump_json() == b.model_dump_json()
    assert generate(family, fmt, difficulty, 9, sample=1).input_text != a.input_text
    assert score_document(a, "\n".join(a.expected)).exact  # the expected output scores exactly


def _records(doc: Document) -> dict[int | None, str]:
    """Input records by ID (None-keyed list order for no_ids), parsed independently of the generator."""
    body = doc.input_text.split("records:\n", 1)[1].splitlines()
    if doc.format == "no_ids":
        return dict(enumerate(body, start=1))
    return {int(m.group(1)): m.group(2) for m in (re.match(r"\[(\d+)\](.*)", line) for line in body)}


def _answers(doc: Document) -> list[str]:
    lines = list(doc.expected)
    return [re.sub(r"^\[\d+\]", "", x) for x in lines] if doc.has_ids else lines


@pytest.mark.parametrize("fmt", ["ordered_ids", "shuffled_ids", "no_ids"])
@pytest.mark.parametrize("difficulty", DIFFICULTIES)
def test_record_families_expected_outputs_are_right(fmt, difficulty):
    arith = generate("arithmetic", fmt, difficulty, 15)
    recs = _records(arith)
    assert [int(a) for a in _answers(arith)] == [eval(recs[i]) for i in sorted(recs)]
    assert all(len(re.findall(r"\d+", r)) == OPERANDS[difficulty] for r in recs.values())
    if fmt == "shuffled_ids":
        order = [int(re.match(r"\[(\d+)\]", line).group(1)) for line in arith.input_text.splitlines()[1:]]
        assert order != sorted(order) and [int(x[1:x.index("]")]) for x in arith.expected] == sorted(order)
    uu = generate("uuid_sort", fmt, difficulty, 15)
    recs = _records(uu)
    assert _answers(uu) == [",".join(sorted(recs[i].split(","))) for i in sorted(recs)]
    assert all(len(r.split(",")) == UUIDS_PER_RECORD[difficulty] for r in recs.values())
    lk = generate("variable_lookup", fmt, difficulty, 15)
    pool = dict(line.split("=") for line in lk.input_text.split("definitions:\n")[1].split("\n\n")[0].splitlines())
    assert len(pool) == POOL_SIZE[difficulty]
    recs = _records(lk)
    assert _answers(lk) == [f"{pool[recs[i].split('+')[0]]} {pool[recs[i].split('+')[1]]}" for i in sorted(recs)]


@pytest.mark.parametrize("fmt, difficulty", [(f, d) for f in ("permute_int", "permute_hex") for d in DIFFICULTIES])
def test_table_permutation_expected_output_applies_the_stated_orders(fmt, difficulty):
    doc = generate("table", fmt, difficulty, 10)
    head, table = doc.input_text.split("\n\ntable:\n")
    rows_order = head.splitlines()[0].removeprefix("row order: ").split(",")
    cols_order = head.splitlines()[1].removeprefix("column order: ").split(",")
    grid = [line.split(",") for line in table.splitlines()]
    col_index = {c: j for j, c in enumerate(grid[0])}
    by_label = {r[0]: r for r in grid[1:]}
    want = [",".join([""] + cols_order)] + [
        ",".join([lab] + [by_label[lab][col_index[c]] for c in cols_order]) for lab in rows_order]
    assert list(doc.expected) == want
    moved = sum(a != b for a, b in zip(rows_order, [f"[R{i}]" for i in range(10)]))
    assert moved >= 2 and (difficulty < 4 or moved >= 8)


def test_table_kv_resolution_expected_output_resolves_every_cell():
    doc = generate("table", "kv_resolve", 2, 6)
    defs, table = doc.input_text.split("\n\ntable:\n")
    pool = dict(line.split("=") for line in defs.removeprefix("definitions:\n").splitlines())
    assert len(pool) == 2 * 5
    grid = [line.split(",") for line in table.splitlines()]
    want = [",".join(grid[0])] + [",".join([r[0]] + [f"{pool[c.split('+')[0]]} {pool[c.split('+')[1]]}" for c in r[1:]])
                                  for r in grid[1:]]
    assert list(doc.expected) == want


def _doc(family, fmt, expected, **kw) -> Document:
    return Document(family=family, format=fmt, difficulty=1, length=len(expected), task="t", input_text="",
                    expected=tuple(expected), **kw)


def test_hand_scored_arithmetic_in_all_three_formats():
    ordered = _doc("arithmetic", "ordered_ids", ["[1]5", "[2]-3", "[3]10"])
    s = score_document(ordered, "[1]5\n[2]-4\n[3]10\n")
    assert s.correct == (True, False, True) and s.accuracy == pytest.approx(2 / 3)
    assert s.consistent == (True, True, True) and not s.exact and s.id_accuracy == pytest.approx(2 / 3)
    # an omitted line shifts every later position; the ID-matched view shows only one record is missing
    shuffled = _doc("arithmetic", "shuffled_ids", ["[1]5", "[2]-3", "[3]10"])
    s = score_document(shuffled, "[1]5\n[3]10\n")
    assert s.correct == (True, False, False) and s.missing == 1 and s.id_accuracy == pytest.approx(2 / 3)
    # blank lines and surrounding spaces are ignored; an extra line spoils exact completion only
    bare = _doc("arithmetic", "no_ids", ["5", "-3", "10"])
    s = score_document(bare, "5\n\n  -3 \n10\nextra\n")
    assert s.correct == (True, True, True) and s.extra == 1 and not s.exact and s.id_accuracy is None
    assert score_document(bare, "5\n-3\n10").exact


def test_hand_scored_uuid_sort_lookup_and_table():
    u1, u2 = "0a000000-0000-4000-8000-000000000000", "0b000000-0000-4000-8000-000000000000"
    doc = _doc("uuid_sort", "no_ids", [f"{u1},{u2}", f"{u1},{u2}"], items_per_record=2)
    s = score_document(doc, f"{u1},{u2}\n{u2},{u1}\n")
    assert s.correct == (True, False) and s.consistent == (True, False)  # unsorted is inconsistent
    lk = _doc("variable_lookup", "ordered_ids", ["[1]quick fox", "[2]quiet harbor"],
              adjectives=("quick", "quiet"), nouns=("fox", "harbor"))
    s = score_document(lk, "[1]quiet fox\n[2]quiet harbor\n")
    assert s.correct == (False, True) and s.consistent == (True, True)  # wrong but well-formed
    assert not is_self_consistent(lk, "[1]slow fox", 0) and not is_self_consistent(lk, "quick fox", 0)
    header = ",[C1],[C0],[C2],[C3],[C4]"
    tb = _doc("table", "permute_int", [header, "[R1],1111,2222,3333,4444,5555"], row_labels=("[R0]", "[R1]"))
    s = score_document(tb, header + "\n[R1],2222,1111,3333,4444,5555\n")
    assert s.correct == (True, False) and s.consistent == (True, True)
    assert not is_self_consistent(tb, "[R9],1111,2222,3333,4444,5555", 1)
    assert not is_self_consistent(tb, "[R1],111,2222,3333,4444,5555", 1)


def test_position_curve_bins_by_relative_position():
    curve = accuracy_by_position([[True, True, False, False], [True, False]], bins=2)
    assert curve.n == (3, 3) and curve.k == (3, 0)
    assert curve.accuracy == (1.0, 0.0)


def _homogeneity_p(curve) -> float:
    """Chi-square test that every position bin has the same accuracy."""
    from scipy.stats import chi2_contingency

    k, n = np.array(curve.k), np.array(curve.n)
    return float(chi2_contingency(np.stack([k, n - k])).pvalue)


@pytest.mark.parametrize("family, fmt", [("arithmetic", "ordered_ids"), ("uuid_sort", "no_ids"),
                                         ("variable_lookup", "shuffled_ids"), ("table", "permute_hex"),
                                         ("table", "kv_resolve")])
def test_declared_error_rate_is_recovered_and_flat_while_decay_shows(family, fmt):
    rng = random.Random(7)
    docs = [generate(family, fmt, 2, 40, sample=s) for s in range(30)]
    flat = [score_document(d, simulated_output(d, rng, error_rate=0.15)) for d in docs]
    summary = summarize(flat)
    assert summary.ci_low <= 0.85 <= summary.ci_high
    assert summary.ci_high - summary.ci_low < 0.1
    assert summary.self_consistency > 0.97  # wrong records stay well-formed
    curve = accuracy_by_position([s.correct for s in flat], bins=5)
    slope = np.polyfit(np.arange(5), curve.accuracy, 1)[0]
    assert abs(slope) < 0.03 and _homogeneity_p(curve) > 0.01  # no position effect
    assert min(curve.ci_low) > 0.7
    decayed = [score_document(d, simulated_output(d, rng, error_rate=0.02, decay=0.6)) for d in docs]
    curve = accuracy_by_position([s.correct for s in decayed], bins=5)
    assert curve.ci_high[-1] < curve.ci_low[0] and _homogeneity_p(curve) < 1e-6
    assert np.polyfit(np.arange(5), curve.accuracy, 1)[0] < -0.08


def test_omissions_break_positions_without_ids_but_ids_still_find_the_records():
    for fmt, id_acc in (("no_ids", None), ("ordered_ids", 59 / 60)):
        doc = generate("arithmetic", fmt, 1, 60)
        dropped = "\n".join(doc.expected[:2] + doc.expected[3:])  # the third line is left out
        s = score_document(doc, dropped)
        assert s.missing == 1 and s.accuracy == pytest.approx(2 / 60)
        assert s.id_accuracy == (pytest.approx(id_acc) if id_acc else None)
    doc = generate("arithmetic", "no_ids", 1, 60)
    s = score_document(doc, simulated_output(doc, random.Random(1), omit_rate=0.1))
    assert s.missing > 0 and s.accuracy < 1 - s.missing / 60


def test_summary_weights_cells_equally_and_counts_exact_documents():
    a = _doc("arithmetic", "no_ids", ["1", "2"])
    b = _doc("arithmetic", "no_ids", ["1", "2", "3", "4"]).model_copy(update={"difficulty": 2})
    scores = [score_document(a, "1\n2"), score_document(a, "1\n9"), score_document(b, "1\n2\n3\n4")]
    s = summarize(scores)
    assert s.accuracy == pytest.approx((1 + 0.5 + 1) / 3)
    assert s.cell_weighted_accuracy == pytest.approx((0.75 + 1.0) / 2)
    assert (s.exact, s.exact_rate) == (2, pytest.approx(2 / 3))


@pytest.mark.parametrize("bad, match", [(("nope", "no_ids", 1, 3), "unknown family"),
                                        (("table", "no_ids", 1, 3), "has formats"),
                                        (("arithmetic", "no_ids", 5, 3), "difficulty"),
                                        (("arithmetic", "no_ids", 1, 0), "at least 1")])
def test_bad_parameters_are_refused(bad, match):
    with pytest.raises(ValueError, match=match):
        generate(*bad)


@pytest.mark.parametrize("family, fmt, difficulty", [("arithmetic", "no_ids", 4), ("uuid_sort", "ordered_ids", 2),
                                                     ("variable_lookup", "shuffled_ids", 3), ("table", "kv_resolve", 1)])
def test_record_count_for_a_nominal_horizon_lands_near_it(family, fmt, difficulty):
    from hrbench.transduction.families import length_for_horizon, nominal_tokens

    for horizon in (4096, 8192):
        n = length_for_horizon(family, fmt, difficulty, horizon)
        assert abs(nominal_tokens(generate(family, fmt, difficulty, n)) / horizon - 1) < 0.15
