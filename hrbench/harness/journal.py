"""The resumable, concurrent trial runner and its journal (the unit of crash safety)."""

from __future__ import annotations

import json
import os
import threading
import time
import traceback
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from tqdm import tqdm

from hrbench.harness.records import TrialRecord, TrialSpec


class TrialJournal:
    """Append-only JSON-lines file of finished trials: the unit of crash safety and resume."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()

    def load(self) -> dict[str, TrialRecord]:
        """Finished trials by key. A torn last line (a crash mid-write) is cut off the file, so the
        next append starts on a line of its own instead of being glued to the fragment."""
        records: dict[str, TrialRecord] = {}
        if not self.path.exists():
            return records
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):
            with self._lock, open(self.path, "r+b") as fh:
                fh.truncate(data.rfind(b"\n") + 1)
            data = data[: data.rfind(b"\n") + 1]
        for line in data.decode("utf-8", errors="replace").splitlines():
            try:
                record = TrialRecord.model_validate_json(line)
            except ValueError:
                continue
            records.setdefault(record.trial_key, record)
        return records

    def append(self, record: TrialRecord) -> None:
        with self._lock, open(self.path, "a") as fh:
            fh.write(record.model_dump_json() + "\n")
            fh.flush()
            os.fsync(fh.fileno())


def run_trials(
    specs: Iterable[TrialSpec],
    execute: Callable[[TrialSpec], TrialRecord],
    journal: TrialJournal,
    concurrency: int = 2,
    description: str = "trials",
    progress: bool = True,
) -> list[TrialRecord]:
    """Run every spec whose key is not yet in the journal; return all records in spec order.

    Trials run in a bounded thread pool (they wait on sandbox processes). A trial that
    raises (an infrastructure failure: sandbox, snapshot, disk) is returned as a `harness_error`
    row but not journaled, so a resumed run tries it again instead of keeping the failure.
    """
    specs = list(specs)
    done = journal.load()
    todo = [s for s in specs if s.key not in done]

    def guarded(spec: TrialSpec) -> tuple[TrialRecord, bool]:
        start = time.monotonic()
        try:
            return execute(spec), True
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=4)}"
            return _error_record(spec, time.monotonic() - start, error), False

    bar = tqdm(total=len(specs), initial=len(specs) - len(todo), desc=description, unit="trial",
               disable=not progress, leave=False, dynamic_ncols=True)
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        futures = [pool.submit(guarded, s) for s in todo]
        for future in as_completed(futures):
            record, keep = future.result()
            if keep:
                journal.append(record)
            done[record.trial_key] = record
            bar.update(1)
    bar.close()
    return [done[s.key] for s in specs]


def _error_record(spec: TrialSpec, wall_s: float, error: str) -> TrialRecord:
    return TrialRecord(
        **spec.model_dump(), trial_key=spec.key, passed=False, stages_passed=0, stopped_stage=spec.stage,
        turns=0, wall_s=wall_s, agent_s=0.0, verifier_s=0.0, exit_reason="harness_error",
        stage_outcomes_json=json.dumps([]), error=error,
    )
