"""The stores of one study's output directory: the one home of its layout.

    OUT/preregistration.json       the frozen protocol (one study version per directory)
    OUT/tables/<asset>/...         parquet tables (through a `TableStore`); a condition's own
                                   assets under OUT/tables/<condition>/<asset>/...
    OUT/journal/<prereg16>/...     trial journals (resume, crash safety)
    OUT/trajectories/<trial key>   ATIF trajectories, referenced from the trial rows
    OUT/cache/                     sandbox snapshots of the environment backend
    OUT/summary.json, report.html  the report
    OUT/.dagster/                  the Dagster instance of CLI runs

Nothing else in hrbench builds a path under OUT or globs it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from hrbench.harness.journal import TrialJournal
from hrbench.harness.trajectory import trajectory_relpath
from hrbench.protocol import StudyError
from hrbench.storage import LocalTableStore, TableStore


class StudyStores:
    """Tables, journals and trajectories of one output directory."""

    def __init__(self, out_dir: str | Path, tables: TableStore | None = None):
        self.out_dir = Path(out_dir).resolve()
        self.tables = tables or LocalTableStore(self.out_dir)

    # -- paths ------------------------------------------------------------------------------

    @property
    def preregistration_path(self) -> Path:
        return self.out_dir / "preregistration.json"

    @property
    def cache_dir(self) -> Path:
        """Where the environment backend keeps its snapshots."""
        return self.out_dir / "cache"

    @property
    def trajectory_dir(self) -> Path:
        """ATIF trajectories of every trial, referenced from the trial rows."""
        return self.out_dir / "trajectories"

    @property
    def summary_path(self) -> Path:
        return self.out_dir / "summary.json"

    @property
    def report_path(self) -> Path:
        return self.out_dir / "report.html"

    @property
    def dagster_home(self) -> Path:
        return self.out_dir / ".dagster"

    # -- pre-registration -------------------------------------------------------------------

    def check_version(self, prereg_sha256: str) -> None:
        """Raise StudyError if the directory already holds another study version."""
        path = self.preregistration_path
        if path.is_file():
            existing = json.loads(path.read_text()).get("prereg_sha256")
            if existing != prereg_sha256:
                raise StudyError(
                    f"{self.out_dir} holds study version {str(existing)[:12]}, but this study is "
                    f"{prereg_sha256[:12]} (its protocol, tasks or hrbench version changed): "
                    "write the new version to a new --out directory")

    # -- journals and trajectories ------------------------------------------------------------

    def journal(self, prereg_sha256: str, kind: str, agent: str, task: str, condition: str | None = None) -> TrialJournal:
        """The journal of one partition (natural rollouts: of one condition, each its own asset)."""
        base = self.out_dir / "journal" / prereg_sha256[:16] / kind
        return TrialJournal((base / condition if condition else base) / agent / f"{task}.jsonl", self.out_dir)

    def trajectory_path(self, trial_key: str) -> Path:
        return self.trajectory_dir / trajectory_relpath(trial_key)

    def relative(self, path: Path) -> str:
        """A path as trial rows store it: relative to the output directory when inside it."""
        try:
            return str(Path(path).relative_to(self.out_dir))
        except ValueError:
            return str(path)

    # -- tables -----------------------------------------------------------------------------

    @staticmethod
    def table_name(asset: str, condition: str | None = None) -> str:
        """A table's name in the store: per-condition assets live under their condition."""
        return f"{condition}/{asset}" if condition else asset

    def read_all(self, asset: str) -> pd.DataFrame:
        """Every stored partition of a table, concatenated (empty if none is stored)."""
        base = self.out_dir / "tables" / asset
        files = sorted(base.rglob("*.parquet")) if base.is_dir() else []
        single = self.out_dir / "tables" / f"{asset}.parquet"
        files += [single] if single.is_file() else []
        return pd.concat([pd.read_parquet(p) for p in files], ignore_index=True) if files else pd.DataFrame()
