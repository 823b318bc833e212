"""Data quality of a study's tables: great-expectations suites built from the pre-registration (docs/quality.md).

Importing this package does not import great_expectations; the first validation does.
"""

from hrbench.quality.gx import ExpectationOutcome, SuiteResult
from hrbench.quality.suites import (
    check_evidence_order, check_expected_success, check_horizon_residuals, check_observed_success,
    check_stage_estimates, check_trials,
)

__all__ = ["ExpectationOutcome", "SuiteResult", "check_evidence_order", "check_expected_success",
           "check_horizon_residuals", "check_observed_success", "check_stage_estimates", "check_trials"]
