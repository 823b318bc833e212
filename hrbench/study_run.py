"""One study bound to an output directory: its design, its stores and its trial runner.

The three are separate (`design.py`, `stores.py`, `runner.py`); a `StudyRun` only holds one of
each for the Dagster assets and the CLI. It holds no statistics and no Dagster.
"""

from __future__ import annotations

from pathlib import Path

from hrbench.design import StudyDesign
from hrbench.protocol import Study
from hrbench.runner import TrialRunner
from hrbench.storage import Store
from hrbench.stores import StudyStores


class StudyRun:
    """A study design, the stores of `out_dir` (in `store`; default: as the environment configures it),
    and a runner over the study's backend."""

    def __init__(self, design: StudyDesign, out_dir: str | Path, progress: bool = True, store: Store | None = None):
        self.design = design
        self.stores = StudyStores(out_dir, store)
        self.runner = TrialRunner(design, self.stores, progress)

    @classmethod
    def from_file(cls, study_path: str | Path, out_dir: str | Path, progress: bool = True) -> "StudyRun":
        return cls(StudyDesign.from_file(study_path), out_dir, progress)

    @property
    def study(self) -> Study:
        return self.design.study

    @property
    def prereg_sha256(self) -> str:
        return self.design.prereg_sha256

    @property
    def out_dir(self) -> Path:
        return self.stores.out_dir

    def check_out_dir(self) -> None:
        """Raise StudyError if the output directory already holds another study version (fetching the
        study's documents from the store first, so a resume from the store alone finds them)."""
        self.stores.hydrate()
        self.stores.check_version(self.prereg_sha256)

    def write_preregistration(self) -> Path:
        """Freeze the protocol into OUT/preregistration.json; an output directory holds one study version.

        A changed protocol (or task, or hrbench version) is a new study version and must not
        overwrite the old one's record, so a different hash already there is an error.
        """
        self.check_out_dir()
        path = self.stores.preregistration_path
        self.design.preregistration.write(path)
        self.stores.publish(path)
        return path
