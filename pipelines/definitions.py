"""The Dagster code location: `workspace.yaml` points here.

HRBENCH_STUDY (default: the built-in demo study) and HRBENCH_OUT (default: ./out)
choose the study and where its tables, journals and report go.
"""

import os

import dagster as dg

from hrbench.protocol import DEMO_STUDY
from pipelines.builder import build_definitions


@dg.definitions
def defs() -> dg.Definitions:
    return build_definitions(os.environ.get("HRBENCH_STUDY", str(DEMO_STUDY)), os.environ.get("HRBENCH_OUT", "out"))
