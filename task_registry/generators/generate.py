"""Regenerate the generated task packages of this registry (byte-identical for the committed seeds).

    PYTHONPATH=. python task_registry/generators/generate.py [REGISTRY_DIR]

Writes the depth calibration tasks (calib-*) and the long-transduction tasks (lt-*). A test
regenerates them into a temporary directory and compares every byte with the committed copies.
"""

from __future__ import annotations

import sys
from pathlib import Path

from hrbench.structure.calibration import write_calibration_tasks
from hrbench.transduction.packages import write_registry_set


def main(root: Path) -> None:
    for task in write_calibration_tasks(root) + write_registry_set(root):
        print(task.name)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1])
