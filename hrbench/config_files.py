"""Reading the YAML files users write (study files, agent configs) with errors that point at them."""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import ValidationError


def read_yaml_mapping(path: Path, error: type[Exception], what: str,
                      expected: str = "a mapping at the top level") -> dict:
    """The file's top-level mapping; `error` names the file (`what` it is) and what is wrong."""
    if not path.is_file():
        raise error(f"{path}: {what} not found")
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise error(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(raw, dict):
        raise error(f"{path}: expected {expected}")
    return raw


def describe_validation_error(err: ValidationError) -> str:
    """One indented line per problem: `field.path: message`."""
    return "\n".join(f"  {'.'.join(str(p) for p in e['loc']) or '(top level)'}: {e['msg']}" for e in err.errors())
