"""A rule: one great-expectations expectation, named in the project's words.

Rules are plain data (the GX expectation's class name and arguments) so that building a suite
never imports great_expectations; `gx.validate` turns them into expectations.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel


class Rule(BaseModel):
    """An expectation on one column (or on the table's columns: `column` None), and what it protects."""

    expectation: str  # a class of great_expectations.expectations, e.g. "ExpectColumnValuesToBeBetween"
    column: str | None
    meaning: str  # the sentence a failure starts with
    arguments: dict[str, Any] = {}

    def build(self, number: int) -> Any:
        """The GX expectation (imports great_expectations), tagged with its place in the suite: GX does not
        return results in the suite's order (one that raised comes first)."""
        import great_expectations.expectations as gxe

        keyword = {} if self.column is None else \
            {"column_A": self.column} if "column_B" in self.arguments else {"column": self.column}
        return getattr(gxe, self.expectation)(**keyword, **self.arguments, meta={"rule": number})

    @property
    def over_distinct_values(self) -> bool:
        """Judged on the set of a column's values (missing / not-expected keys), not row by row."""
        return self.expectation.startswith("ExpectColumnDistinctValues")


def has_columns(columns: list[str], meaning: str) -> Rule:
    """The table has every one of these columns (it may have more: a suite's own derived columns)."""
    return Rule(expectation="ExpectTableColumnsToMatchSet", column=None, meaning=meaning,
                arguments={"column_set": columns, "exact_match": False})


def unique(column: str, meaning: str) -> Rule:
    return Rule(expectation="ExpectColumnValuesToBeUnique", column=column, meaning=meaning)


def exactly(column: str, values: set[str], meaning: str) -> Rule:
    return Rule(expectation="ExpectColumnDistinctValuesToEqualSet", column=column, meaning=meaning,
                arguments={"value_set": sorted(values)})


def at_least(column: str, values: set[str], meaning: str) -> Rule:
    return Rule(expectation="ExpectColumnDistinctValuesToContainSet", column=column, meaning=meaning,
                arguments={"value_set": sorted(values)})


def one_of(column: str, values: set[str], meaning: str) -> Rule:
    return Rule(expectation="ExpectColumnValuesToBeInSet", column=column, meaning=meaning,
                arguments={"value_set": sorted(values)})


def between(column: str, low: float | None, high: float | None, meaning: str) -> Rule:
    return Rule(expectation="ExpectColumnValuesToBeBetween", column=column, meaning=meaning,
                arguments={"min_value": low, "max_value": high})


def present(column: str, meaning: str) -> Rule:
    return Rule(expectation="ExpectColumnValuesToNotBeNull", column=column, meaning=meaning)


def after(column: str, earlier: str, meaning: str) -> Rule:
    """Every row's `column` strictly later than its `earlier` (rows missing either are left to `present`)."""
    return Rule(expectation="ExpectColumnPairValuesAToBeGreaterThanB", column=column, meaning=meaning,
                arguments={"column_B": earlier, "or_equal": False, "ignore_row_if": "either_value_is_missing"})


def not_above(column: str, limit: str, meaning: str) -> Rule:
    """Every row's `column` at most its `limit` column (rows missing either are left to `present`)."""
    return Rule(expectation="ExpectColumnPairValuesAToBeGreaterThanB", column=limit, meaning=meaning,
                arguments={"column_B": column, "or_equal": True, "ignore_row_if": "either_value_is_missing"})
