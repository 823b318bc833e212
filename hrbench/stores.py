"""The stores of one study's output: the one home of its layout.

A study's output lives in a `Store` (hrbench/storage): the output directory itself (the default)
or an S3-compatible bucket prefix. Keys, relative to the store's root:

    preregistration.json           the frozen protocol (one study version per store)
    registrations/<agent>.json     each agent's registration
    study_source.json              which study file made it
    tables/<asset>/...             parquet tables (through a `TableStore`); a condition's own
                                   assets under tables/<condition>/<asset>/...
    lineage/<asset>/...json        the record beside every table (hrbench/lineage.py)
    journal/<prereg16>/...         trial journals (resume, crash safety); with an object store,
                                   `<task>.jsonl.d/<sha of trial key>.json`, one immutable object per trial
    trajectories/<trial key>       ATIF trajectories (gzip JSON), referenced from the trial rows
    summary.json, report.html      the report

The local output directory OUT is always the working copy: OUT/cache/ (sandbox snapshots of the
environment backend), OUT/.dagster/ (the Dagster instance of CLI runs), the lock, the trial
journals as write-ahead logs and trajectories as written, and documents before they are published.
With the local store OUT is the store too, and publishing is a no-op.

Nothing else in hrbench builds a key or path under OUT or globs it.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd

from hrbench.harness.journal import TrialJournal
from hrbench.harness.records import TrialRecord
from hrbench.harness.trajectory import trajectory_relpath
from hrbench.protocol import StudyError
from hrbench.storage import Store, TableStore, store_for
from hrbench.storage.base import check_key

PREREGISTRATION_KEY, STUDY_SOURCE_KEY = "preregistration.json", "study_source.json"
SUMMARY_KEY, REPORT_KEY = "summary.json", "report.html"
REGISTRATIONS = "registrations"
# Documents a study keeps outside its tables and journals; fetched into the working copy to resume.
DOCUMENTS = (PREREGISTRATION_KEY, STUDY_SOURCE_KEY)
DOCUMENT_FOLDERS = (REGISTRATIONS,)


def registration_key(agent: str) -> str:
    """Where an agent's registration lives, in the store and under OUT."""
    return f"{REGISTRATIONS}/{agent}.json"


class StudyStores:
    """Tables, journals, trajectories and documents of one study's output, in `store`
    (default: as the environment configures it, `storage.store_for`: the output directory itself)."""

    def __init__(self, out_dir: str | Path, store: Store | None = None):
        self.out_dir = Path(out_dir).resolve()
        self.store = store if store is not None else store_for(self.out_dir)
        self.tables = TableStore(self.store)

    @property
    def remote(self) -> bool:
        """True when the store is not the output directory itself (documents are published to it)."""
        probe = self.store.local_path("x")
        return probe is None or probe.parent != self.out_dir

    # -- paths of the working copy ----------------------------------------------------------

    @property
    def preregistration_path(self) -> Path:
        return self.out_dir / PREREGISTRATION_KEY

    def registration_path(self, agent: str) -> Path:
        return self.out_dir / registration_key(agent)

    @property
    def journal_root(self) -> Path:
        """Where the trial journals are written (the write-ahead logs of every trial)."""
        return self.out_dir / "journal"

    @property
    def logs_dir(self) -> Path:
        """Where a failed step's whole error is written (`hrbench run` names the file)."""
        return self.out_dir / "logs"

    @property
    def cache_dir(self) -> Path:
        """Where the environment backend keeps its snapshots (always local)."""
        return self.out_dir / "cache"

    @property
    def trajectory_dir(self) -> Path:
        """Where the harness writes the ATIF trajectory of every trial (pushed to the store with its row)."""
        return self.out_dir / "trajectories"

    @property
    def summary_path(self) -> Path:
        return self.out_dir / SUMMARY_KEY

    @property
    def report_path(self) -> Path:
        return self.out_dir / REPORT_KEY

    @property
    def dagster_home(self) -> Path:
        return self.out_dir / ".dagster"

    # -- documents --------------------------------------------------------------------------

    def key_of(self, path: Path) -> str:
        """The store key of a file of the working copy."""
        try:
            return Path(path).resolve().relative_to(self.out_dir).as_posix()
        except ValueError:
            raise ValueError(f"{path} is not inside the output directory {self.out_dir}") from None

    def publish(self, path: Path) -> str:
        """Copy a file of the working copy (a report, a registration) into the store; returns its address."""
        key = self.key_of(path)
        if not self.remote:
            return self.store.address(key)
        return self.store.put(key, Path(path).read_bytes())

    def fetch(self, key: str) -> Path | None:
        """A stored object as a file of the working copy (downloaded if missing there); None if not stored."""
        path = self.out_dir / check_key(key)  # keys come from stored rows too: never outside OUT
        if path.is_file() or not self.remote:
            return path if path.is_file() else None
        try:
            data = self.store.get(key)
        except FileNotFoundError:
            return None
        path.parent.mkdir(parents=True, exist_ok=True)
        scratch = path.with_name(f".{path.name}.fetch")
        scratch.write_bytes(data)
        scratch.replace(path)
        return path

    def hydrate(self) -> None:
        """Fetch the study's documents from the store into the working copy (a resume from the store alone)."""
        if not self.remote:
            return
        for key in DOCUMENTS:
            self.fetch(key)
        for folder in DOCUMENT_FOLDERS:
            for key in self.store.list(folder):
                self.fetch(key)

    # -- pre-registration -------------------------------------------------------------------

    def check_version(self, prereg_sha256: str) -> None:
        """Raise StudyError if the store already holds another study version."""
        path = self.fetch(PREREGISTRATION_KEY)
        if path is not None:
            existing = json.loads(path.read_text()).get("prereg_sha256")
            if existing != prereg_sha256:
                raise StudyError(
                    f"{self.store.address(PREREGISTRATION_KEY)} holds study version {str(existing)[:12]}, but "
                    f"this study is {prereg_sha256[:12]} (its protocol, tasks or hrbench version changed): "
                    "write the new version to a new --out directory")

    # -- journals and trajectories ------------------------------------------------------------

    def journal(self, prereg_sha256: str, kind: str, agent: str, task: str, condition: str | None = None) -> TrialJournal:
        """The journal of one partition (natural rollouts: of one condition, each its own asset)."""
        parts = [self.journal_root.name, prereg_sha256[:16], kind, *([condition] if condition else []), agent, f"{task}.jsonl"]
        key = "/".join(parts)
        mirror = StoreJournalMirror(self, key) if self.remote else None
        return TrialJournal(self.out_dir / key, self.out_dir, mirror)

    def trajectory_path(self, trial_key: str) -> Path:
        return self.trajectory_dir / trajectory_relpath(trial_key)

    def trajectory_file(self, relpath: str) -> Path | None:
        """A trial row's trajectory as a local file, fetched from the store if needed (None: not stored,
        or a path outside the output directory, which no store holds)."""
        try:
            return self.fetch(Path(relpath).as_posix())
        except ValueError:
            return None

    def relative(self, path: Path) -> str:
        """A path as trial rows store it: relative to the output directory when inside it."""
        try:
            return str(Path(path).relative_to(self.out_dir))
        except ValueError:
            return str(path)

    # -- tables -----------------------------------------------------------------------------

    def read_all(self, asset: str) -> pd.DataFrame:
        """Every stored partition of a table, concatenated (empty if none is stored); `asset` is its key in the
        table catalogue (hrbench/catalogue.py: `<condition>/<name>` for a condition's own table)."""
        return self.tables.read_all(asset)


class StoreJournalMirror:
    """A journal's records as immutable objects in the store: `<journal key>.d/<sha256(trial key)[:32]>.json`
    (a failed attempt: `<journal key>.attempts.d/<sha>-<n>.json`).

    One object per trial, keyed by the trial, so re-uploading after a crash or an outage rewrites the
    same object (idempotent) and a trial is never two; resume is the union of the objects. A row's
    trajectory and artifacts are uploaded before the row, so a stored row never points at a missing file."""

    def __init__(self, stores: StudyStores, journal_key: str):
        self.stores = stores
        self.records_prefix = f"{journal_key}.d"
        self.attempts_prefix = f"{journal_key}.attempts.d"

    @staticmethod
    def _name(trial_key: str) -> str:
        return hashlib.sha256(trial_key.encode()).hexdigest()[:32]

    def push(self, record: TrialRecord, attempt: int | None = None) -> None:
        for relpath in (record.trajectory_path, *_artifact_paths(record)):
            self._upload(relpath)
        if attempt is None:
            key = f"{self.records_prefix}/{self._name(record.trial_key)}.json"
        else:
            key = f"{self.attempts_prefix}/{self._name(record.trial_key)}-{attempt}.json"
        self.stores.store.put(key, record.model_dump_json().encode())

    def _upload(self, relpath: str | None) -> None:
        """A file the row points at (relative to OUT), copied to the same key; one outside OUT has no key."""
        if not relpath or Path(relpath).is_absolute():
            return
        local = self.stores.out_dir / relpath
        if local.is_file():
            self.stores.store.put(Path(relpath).as_posix(), local.read_bytes())

    def _rows(self, prefix: str) -> list[TrialRecord]:
        store = self.stores.store
        return [TrialRecord.model_validate_json(store.get(k)) for k in store.list(prefix) if k.endswith(".json")]

    def pull(self) -> dict[str, TrialRecord]:
        return {r.trial_key: r for r in self._rows(self.records_prefix)}

    def pull_attempts(self) -> list[TrialRecord]:
        return self._rows(self.attempts_prefix)


def _artifact_paths(record: TrialRecord) -> list[str]:
    """The artifact files a trial row lists (`artifacts_json`: {stage: [paths relative to OUT]})."""
    return [path for paths in json.loads(record.artifacts_json or "{}").values() for path in paths]
