"""The resumable, concurrent trial runner and its journal (the unit of crash safety).

A trial's row is journaled once it has a result. An attempt without one (hrbench.exits: the agent
program crashed, the endpoint died, the sandbox failed, the verifier left no reward) is retried in
the same run, up to the study's `retries.max_attempts`; each such attempt's row goes to the attempts
journal beside it (`<dir>/attempts/<name>`). A trial still without a result is missing for this run
and the next run tries it again, so one transient failure never blocks an output directory.
"""

from __future__ import annotations

import json
import os
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor, as_completed
from datetime import datetime, timezone
from pathlib import Path
from typing import Protocol

from pydantic import ValidationError
from tqdm import tqdm

from hrbench.exits import is_missing
from hrbench.harness.records import TrialRecord, TrialSpec
from hrbench.harness.trajectory import note_earlier_attempts
from hrbench.protocol import Retries


class JournalError(RuntimeError):
    """A journal the runner cannot use (e.g. its path is a directory); says which and what to do."""


class JournalWarning(UserWarning):
    """Journal lines that were not trial records and were skipped (their trials run again)."""


class JournalMirror(Protocol):
    """Where a journal's records are copied once journaled locally (an object store: `stores.py`)."""

    def push(self, record: TrialRecord, attempt: int | None = None) -> None:
        """Copy one record (and its trajectory) idempotently; `attempt` numbers a failed attempt."""

    def pull(self) -> dict[str, TrialRecord]:
        """Every record copied so far, by trial key."""

    def pull_attempts(self) -> list[TrialRecord]:
        """Every failed attempt copied so far."""


class TrialJournal:
    """Append-only JSON-lines file of finished trials, plus a sidecar of failed attempts.

    `out_dir` is the directory trial rows' `trajectory_path` is relative to; when given, the
    trajectory of a failed attempt is renamed aside (`….attempt-N.json.gz`) so the retry does not
    overwrite it. With a `mirror` the file is a write-ahead log: each record is appended and
    fsynced here first, then pushed to the mirror; `load` is the union of both and pushes what the
    mirror lacks (a crash or outage between the two), so the mirror alone can resume a study."""

    def __init__(self, path: Path, out_dir: Path | None = None, mirror: JournalMirror | None = None):
        self.path = Path(path)
        self.attempts_path = self.path.parent / "attempts" / self.path.name
        self.out_dir = Path(out_dir) if out_dir is not None else None
        self.mirror = mirror
        self.skipped_lines: list[int] = []
        self._earlier: dict[str, list[dict]] | None = None  # attempts kept per trial key, read once
        self._lock = threading.Lock()
        self._attempts_lock = threading.Lock()  # numbering attempts (trials retry from several threads)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError) as exc:
            raise JournalError(f"{self.path.parent}: cannot hold the trial journal: a file is in the way "
                               f"({exc.filename}); move it away or use a new --out directory") from exc

    def load(self) -> dict[str, TrialRecord]:
        """Trials with a result, by key (rows without one, hrbench.exits, are not results: those trials run again).

        A torn last line (a crash mid-write) is cut off the file, so the next append starts on a line
        of its own instead of being glued to the fragment; other unreadable lines are left in place and
        reported by line number (a `JournalWarning`)."""
        self.skipped_lines = []
        if self.path.is_dir():
            raise JournalError(f"{self.path}: the trial journal is a directory, not a file; move it away "
                               "(or use a new --out directory) and run again")
        if not self.path.exists():
            return self._reconcile({})
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):
            data = self._mend_torn_tail(data)
        records: dict[str, TrialRecord] = {}
        problems: list[str] = []
        for number, raw in enumerate(data.split(b"\n")[:-1], start=1):
            if not raw.strip():
                continue
            try:
                record = TrialRecord.model_validate_json(raw)
            except ValidationError as exc:
                self.skipped_lines.append(number)
                problems.append(_first_problem(exc))
                continue
            if not is_missing(record.exit_reason):  # rows journaled before attempts had their own file
                records.setdefault(record.trial_key, record)
        if self.skipped_lines:
            warnings.warn(JournalWarning(
                f"{self.path}: skipped unreadable line(s) {_ranges(self.skipped_lines)} (not trial records: "
                f"{problems[0]}); their trials, if any, run again"), stacklevel=2)
        return self._reconcile(records)

    def _reconcile(self, records: dict[str, TrialRecord]) -> dict[str, TrialRecord]:
        """Local and mirrored records, united: what only the mirror has is logged here, what only
        this log has is pushed (each trial key once in both)."""
        if self.mirror is None:
            return records
        remote = self.mirror.pull()
        for key, record in records.items():
            if key not in remote:
                self.mirror.push(record)
        for key in sorted(remote.keys() - records.keys()):
            _append_line(self.path, remote[key].model_dump_json(), self._lock)
            records[key] = remote[key]
        return records

    def _mend_torn_tail(self, data: bytes) -> bytes:
        cut = data.rfind(b"\n") + 1
        tail = data[cut:]
        try:
            TrialRecord.model_validate_json(tail)
        except ValidationError:
            with self._lock, open(self.path, "r+b") as fh:
                fh.truncate(cut)
            after = data.count(b"\n", 0, cut)
            warnings.warn(JournalWarning(
                f"{self.path}: cut a torn last line ({len(tail)} bytes after line {after}, a crash mid-write); "
                "that trial runs again"), stacklevel=3)
            return data[:cut]
        with self._lock, open(self.path, "ab") as fh:  # a whole record that only lacks its newline: keep it
            fh.write(b"\n")
        return data + b"\n"

    def append(self, record: TrialRecord) -> None:
        """Journal a trial that has a result (it is done for every later run): locally, then in the mirror."""
        _append_line(self.path, record.model_dump_json(), self._lock)
        if self.mirror is not None:
            self.mirror.push(record)

    def append_attempt(self, record: TrialRecord) -> TrialRecord:
        """Keep an attempt without a result (its row, and its trajectory under a name of its own, so the
        retry does not overwrite it); returns the row kept. Safe from several threads."""
        with self._attempts_lock:
            earlier = self._earlier_attempts().setdefault(record.trial_key, [])
            n = len(earlier) + 1
            if self.out_dir is not None and record.trajectory_path:
                source = self.out_dir / record.trajectory_path
                target = source.with_name(source.name.removesuffix(".json.gz") + f".attempt-{n}.json.gz")
                try:
                    os.replace(source, target)
                    record = record.model_copy(update={"trajectory_path": str(target.relative_to(self.out_dir))})
                except (OSError, ValueError):  # no trajectory to keep: the row still is
                    pass
            record = record.model_copy(update={"attempts": n})
            earlier.append(_attempt_note(record))
        self.attempts_path.parent.mkdir(parents=True, exist_ok=True)
        _append_line(self.attempts_path, record.model_dump_json(), self._lock)
        if self.mirror is not None:
            self.mirror.push(record, attempt=n)
        return record

    def note_attempts(self, record: TrialRecord, earlier: list[dict]) -> None:
        """Name a trial's earlier attempts in its trajectory (when it has one under `out_dir`)."""
        if self.out_dir is None or not record.trajectory_path:
            return
        try:
            note_earlier_attempts(self.out_dir / record.trajectory_path, earlier)
        except (OSError, ValueError):  # no readable trajectory: the row still lists them
            pass

    def earlier_attempts(self, trial_key: str) -> list[dict]:
        """The attempts of a trial kept so far (this run's and earlier runs'), oldest first."""
        with self._attempts_lock:
            return list(self._earlier_attempts().get(trial_key, []))

    def _earlier_attempts(self) -> dict[str, list[dict]]:
        if self._earlier is None:
            self._earlier = {}
            for row in self.attempts():
                self._earlier.setdefault(row.trial_key, []).append(_attempt_note(row))
            for notes in self._earlier.values():
                for n, note in enumerate(notes, start=1):
                    note["attempt"] = n
        return self._earlier

    def attempts(self) -> list[TrialRecord]:
        """Every failed attempt kept so far, oldest first (unreadable lines skipped; with a mirror, the
        mirror's attempts too when this log has none)."""
        if not self.attempts_path.is_file():
            return self.mirror.pull_attempts() if self.mirror is not None else []
        rows = []
        for line in self.attempts_path.read_bytes().splitlines():
            try:
                rows.append(TrialRecord.model_validate_json(line))
            except ValidationError:
                continue
        return rows


def _attempt_note(record: TrialRecord) -> dict:
    """One earlier attempt as the trial's row lists it."""
    first_line = (record.error or "").strip().splitlines()
    return {"attempt": record.attempts, "exit_reason": record.exit_reason,
            "error": first_line[0][:300] if first_line else None, "trajectory_path": record.trajectory_path}


def check_journal_tree(root: Path) -> None:
    """Raise JournalError naming every journal path under `root` that is a directory, before any run
    starts (inside a run it would surface as one failed step among many)."""
    if not root.is_dir():
        return
    bad = sorted(str(p) for p in root.rglob("*.jsonl") if p.is_dir())
    if bad:
        raise JournalError(f"{bad[0]}: the trial journal is a directory, not a file"
                           + (f" (and {len(bad) - 1} more)" if len(bad) > 1 else "")
                           + "; move it away (or use a new --out directory) and run again")


def _append_line(path: Path, line: str, lock: threading.Lock) -> None:
    try:
        with lock, open(path, "a") as fh:
            fh.write(line + "\n")
            fh.flush()
            os.fsync(fh.fileno())
    except IsADirectoryError as exc:
        raise JournalError(f"{path}: the trial journal is a directory, not a file; move it away") from exc


def _first_problem(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(p) for p in error["loc"])
    return f"{where}: {error['msg']}" if where else error["msg"]


def _ranges(numbers: list[int]) -> str:
    """[1, 2, 3, 7] -> '1-3, 7'."""
    spans: list[list[int]] = []
    for n in numbers:
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


def run_trials(
    specs: Iterable[TrialSpec],
    execute: Callable[[TrialSpec], TrialRecord],
    journal: TrialJournal,
    concurrency: int = 2,
    description: str = "trials",
    progress: bool = True,
    slots: threading.Semaphore | None = None,
    retries: Retries | None = None,
) -> list[TrialRecord]:
    """Run every spec without a result in the journal; return all records in spec order.

    Trials run in a bounded thread pool (they wait on sandbox processes); with `slots`, each attempt
    also holds one of them while it runs, so calls running side by side (several partitions) share
    one bound. An attempt without a result (hrbench.exits: returned by `execute`, or anything raised
    from it, which becomes `harness_error`) is kept in the attempts journal and, when its reason is
    one of `retries.transient`, tried again with the same spec after a backoff, up to
    `retries.max_attempts` (default: the study default). A trial still without a result is returned
    as such for this run's table (missing: left out of every estimate); the next run tries it again.
    """
    specs = list(specs)
    retries = retries or Retries()
    done = journal.load()
    todo = [s for s in specs if s.key not in done]

    def once(spec: TrialSpec) -> TrialRecord:
        start = time.monotonic()
        # when the attempt began: the evidence-order check compares it with the time P_expected was fixed
        started_at = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
        try:
            if slots is None:
                record = execute(spec)
            else:
                with slots:
                    record = execute(spec)
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=4)}"
            record = _error_record(spec, time.monotonic() - start, error)
        return record.model_copy(update={"started_at": started_at})

    def attempts(spec: TrialSpec) -> TrialRecord:
        """Attempts of one trial in this run; the last one's row, every earlier one kept as an attempt."""
        for retry in range(retries.max_attempts):
            if retry:
                time.sleep(retries.backoff(retry))  # holding no slot: others run meanwhile
            record = once(spec)
            final = not is_missing(record.exit_reason) or record.exit_reason not in retries.transient \
                or retry == retries.max_attempts - 1
            if final:
                break
            journal.append_attempt(record)
        earlier = journal.earlier_attempts(spec.key)
        record = record.model_copy(update={"attempts": len(earlier) + 1, "earlier_attempts_json": json.dumps(earlier)})
        if earlier:
            journal.note_attempts(record, earlier)
        return journal.append_attempt(record) if is_missing(record.exit_reason) else record

    bar = tqdm(total=len(specs), initial=len(specs) - len(todo), desc=description, unit="trial",
               disable=not progress, leave=False, dynamic_ncols=True)
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        futures = [pool.submit(attempts, s) for s in todo]
        try:
            for future in as_completed(futures):
                record = future.result()
                if not is_missing(record.exit_reason):
                    journal.append(record)
                done[record.trial_key] = record
                bar.update(1)
        except BaseException:  # e.g. the journal's store is unreachable: stop now, not after every trial
            pool.shutdown(wait=True, cancel_futures=True)
            raise
        finally:
            bar.close()
    return [done[s.key] for s in specs]


def _error_record(spec: TrialSpec, wall_s: float, error: str) -> TrialRecord:
    return TrialRecord(
        **spec.model_dump(), trial_key=spec.key, passed=False, stages_passed=0, stopped_stage=spec.stage,
        turns=0, wall_s=wall_s, agent_s=0.0, verifier_s=0.0, exit_reason="harness_error",
        stage_outcomes_json=json.dumps([]), error=error,
    )
