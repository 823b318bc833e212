"""Reading the files users write (study files, agent configs, task files) with errors that point at them."""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import ValidationError


def read_text_file(path: Path, error: type[Exception], what: str) -> str:
    """The file's text, which must be UTF-8 without NUL bytes; `error` says which file and where it is not."""
    try:
        data = path.read_bytes()
    except IsADirectoryError as exc:
        raise error(f"{path}: {what} is a directory, not a file") from exc
    except OSError as exc:
        raise error(f"{path}: cannot read {what}: {exc.strerror or exc}") from exc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise error(f"{path}:{line}: {what} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset "
                    f"{exc.start}); save it as UTF-8") from exc
    if "\0" in text:
        line = text.count("\n", 0, text.index("\0")) + 1
        raise error(f"{path}:{line}: {what} contains a NUL byte (a binary file?); it must be plain text")
    return text


class _DuplicateKey(Exception):
    def __init__(self, key: object, line: int, first: int):
        super().__init__(f"line {line}: key {key!r} repeated (first at line {first})")
        self.key, self.line, self.first = key, line, first


class _StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader, except a key repeated in one mapping is an error instead of the last one winning
    (a repeated `tasks:` would otherwise silently replace the first)."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            first: dict[object, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":  # `<<:` merges are overridden by design
                    continue
                key = self.construct_object(key_node, deep=True)
                line = key_node.start_mark.line + 1
                try:
                    if key in first:
                        raise _DuplicateKey(key, line, first[key])
                    first[key] = line
                except TypeError:  # an unhashable key: the base class reports it
                    continue
        return super().construct_mapping(node, deep)


def read_yaml_mapping(path: Path, error: type[Exception], what: str,
                      expected: str = "a mapping at the top level") -> dict:
    """The file's top-level mapping; `error` names the file (`what` it is), the line, and what is wrong."""
    if path.is_dir():
        raise error(f"{path}: {what} is a directory, not a file")
    if not path.is_file():
        raise error(f"{path}: {what} not found")
    text = read_text_file(path, error, what)
    try:
        raw = yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass
    except _DuplicateKey as exc:
        raise error(f"{path}:{exc.line}: key {exc.key!r} is repeated (first at line {exc.first}); "
                    "each key may appear once in a mapping: merge the two entries") from exc
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        problem = " ".join(p for p in (exc.context, exc.problem) if p)
        raise error(f"{where}: not valid YAML: {problem}") from exc
    except yaml.YAMLError as exc:
        raise error(f"{path}: not valid YAML: {' '.join(str(exc).split())}") from exc
    if not isinstance(raw, dict):
        raise error(f"{path}: expected {expected}")
    return raw


def describe_validation_error(err: ValidationError) -> str:
    """One indented line per problem: `field.path: message`."""
    return "\n".join(f"  {'.'.join(str(p) for p in e['loc']) or '(top level)'}: {e['msg']}" for e in err.errors())
