"""One ephemeral great-expectations context per process, and a validation summarized for people.

great_expectations takes seconds to import, so it is imported here, on the first validation, and
nowhere else: the CLI and everything that runs no check never pay for it. The context holds
nothing on disk (ephemeral) and a single pandas data source whose whole-dataframe batch is the
table being checked.
"""

from __future__ import annotations

import functools
import threading
from typing import Any

import pandas as pd
from pydantic import BaseModel

from hrbench.quality.rules import Rule

# GX contexts and their metric computations are not documented as thread-safe; checks in one
# process (the in-process executor runs several) validate one at a time.
_LOCK = threading.Lock()
EXAMPLES = 5  # unexpected rows shown per failed expectation
TABLE = "(table)"  # the column named by an expectation on the table's columns


class ExpectationOutcome(BaseModel):
    """One expectation of a suite, as GX judged it on one table."""

    expectation: str  # GX's type, e.g. expect_column_values_to_be_between
    column: str
    meaning: str  # what the rule protects, in the project's words
    success: bool
    rows: int | None = None  # rows the expectation looked at
    unexpected: int = 0  # rows (or key values) that broke it
    examples: list[str] = []
    error: str | None = None  # GX raised instead of judging (a missing column, a wrong type)

    def line(self) -> str:
        """One readable sentence: what broke, how often, a few examples."""
        if self.error:
            return f"{self.meaning} ({self.expectation} on {self.column!r}): could not be checked: {self.error}"
        count = f"{self.unexpected} of {self.rows} rows" if self.rows is not None else f"{self.unexpected} value(s)"
        shown = "; ".join(self.examples)
        return f"{self.meaning} ({self.expectation} on {self.column!r}): {count}" + (f", e.g. {shown}" if shown else "")


class SuiteResult(BaseModel):
    """A suite's verdict on one table: every expectation's outcome."""

    suite: str
    rows: int
    outcomes: list[ExpectationOutcome]
    remedy: str = ""  # what the user should do when the suite fails

    @property
    def success(self) -> bool:
        return all(o.success for o in self.outcomes)

    @property
    def failed(self) -> list[ExpectationOutcome]:
        return [o for o in self.outcomes if not o.success]

    def description(self) -> str | None:
        """The failed expectations, one per line, then what to do (None when all passed)."""
        if self.success:
            return None
        return "\n".join([*(o.line() for o in self.failed), *([f"What to do: {self.remedy}"] if self.remedy else [])])

    def metadata(self) -> dict[str, Any]:
        """Plain values for a check's metadata: counts, and per failed expectation its unexpected rows and examples."""
        meta: dict[str, Any] = {"suite": self.suite, "rows": self.rows, "expectations": len(self.outcomes),
                                "failed": len(self.failed)}
        for o in self.failed:
            name = f"{o.expectation}/{o.column}"
            meta[f"unexpected/{name}"] = o.unexpected
            meta[f"examples/{name}"] = "; ".join(o.examples) or (o.error or "")
        return meta


@functools.cache
def _batch_definition() -> Any:
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)  # no tqdm bars in run logs
    source = context.data_sources.add_pandas("hrbench")
    return source.add_dataframe_asset("table").add_batch_definition_whole_dataframe("whole")


def validate(suite: str, frame: pd.DataFrame, rules: list[Rule], index: list[str], remedy: str = "") -> SuiteResult:
    """Validate `frame` against `rules` with GX; `index` names the columns that identify a row in examples,
    `remedy` what to do on a failure."""
    import great_expectations as gx

    index = [c for c in index if c in frame.columns]
    with _LOCK:
        # a fresh index: GX locates unexpected rows by index label, and a concatenated table may repeat labels
        batch = _batch_definition().get_batch(batch_parameters={"dataframe": frame.reset_index(drop=True)})
        expectations = [r.build(i) for i, r in enumerate(rules)]
        result = batch.validate(gx.ExpectationSuite(name=suite, expectations=expectations), result_format={
            "result_format": "COMPLETE", "unexpected_index_column_names": index, "partial_unexpected_count": EXAMPLES})
    return SuiteResult(suite=suite, rows=len(frame), remedy=remedy,
                       outcomes=[_outcome(rules[r.expectation_config.meta["rule"]], r, index) for r in
                                 sorted(result.results, key=lambda r: r.expectation_config.meta["rule"])])


def _outcome(rule: Rule, result: Any, index: list[str]) -> ExpectationOutcome:
    outcome = ExpectationOutcome(expectation=result.expectation_config.type, column=rule.column or TABLE,
                                 meaning=rule.meaning, success=bool(result.success))
    error = _raised(result.exception_info)
    if error:
        return outcome.model_copy(update={"success": False, "error": error})
    detail = result.result or {}
    if rule.column is None:  # the table's columns: the declared ones it lacks
        missing = (detail.get("details") or {}).get("mismatched", {}).get("missing") or []
        return outcome.model_copy(update={"unexpected": len(missing),
                                          "examples": [f"missing column {c}" for c in missing][:EXAMPLES]})
    if rule.over_distinct_values:
        # judged on the column's distinct values: the keys missing, then the keys not expected
        missing = [f"missing {v}" for v in detail.get("partial_missing_list", [])]
        extra = [f"not expected {v}" for v in detail.get("partial_unexpected_list", [])]
        count = int(detail.get("missing_count") or 0) + int(detail.get("unexpected_count") or 0)
        return outcome.model_copy(update={"unexpected": count, "examples": (missing + extra)[:EXAMPLES]})
    rows = detail.get("partial_unexpected_index_list") or []
    examples = [", ".join(f"{k}={_short(v)}" for k, v in row.items() if not _missing(v)) for row in rows[:EXAMPLES]] \
        if index else \
        [_short(v) for v in detail.get("partial_unexpected_list", [])[:EXAMPLES]]
    return outcome.model_copy(update={"rows": detail.get("element_count"),
                                      "unexpected": int(detail.get("unexpected_count") or 0), "examples": examples})


def _raised(info: Any) -> str | None:
    """GX's message when computing the expectation raised: its info is flat, or keyed by the metric that raised."""
    if not isinstance(info, dict):
        return None
    found = [info] if "raised_exception" in info else [v for v in info.values() if isinstance(v, dict)]
    return next((str(f.get("exception_message")) for f in found if f.get("raised_exception")), None)


def _missing(value: Any) -> bool:
    """None or NaN: left out of an example (a null check's examples would all say so)."""
    return value is None or (isinstance(value, float) and value != value)


def _short(value: Any) -> str:
    text = str(value.item() if hasattr(value, "item") else value)
    return text if len(text) <= 80 else text[:77] + "..."
