"""Reading a corpus template file (`<lang>_templates.yaml`): the error type and the checks both
template loaders (`corpus_spec` for English, `corpus_zh_spec` for Chinese) build on.

Each check takes `where`, the file and key path the message starts with, so every error names both
(``en_templates.yaml: fillers.name: expected a mapping, got list``).

Example::

    >>> expect_string("Alex", "en_templates.yaml: fillers.name[0]")
    'Alex'
    >>> try:
    ...     expect_mapping([], "en_templates.yaml: fillers")
    ... except CorpusSpecError as error:
    ...     print(error)
    en_templates.yaml: fillers: expected a mapping, got list
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import yaml

__all__ = ["CorpusSpecError", "expect_list", "expect_mapping", "expect_string", "read_yaml"]


class CorpusSpecError(ValueError):
    """A template file that does not follow its format; the message names the file and the key."""


def read_yaml(path: Path, shown: str) -> Any:
    """The parsed YAML document at `path`; CorpusSpecError starting with `shown` when it does not parse."""
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        raise CorpusSpecError(f"{shown}: not valid YAML: {error}") from error


def expect_mapping(value: Any, where: str) -> Mapping[str, Any]:
    """`value` when it is a mapping."""
    if not isinstance(value, dict):
        raise CorpusSpecError(f"{where}: expected a mapping, got {type(value).__name__}")
    return value


def expect_list(value: Any, where: str) -> list[Any]:
    """`value` when it is a list."""
    if not isinstance(value, list):
        raise CorpusSpecError(f"{where}: expected a list, got {type(value).__name__}")
    return value


def expect_string(value: Any, where: str) -> str:
    """`value` when it is a string with something besides white space in it."""
    if not isinstance(value, str) or not value.strip():
        raise CorpusSpecError(f"{where}: expected a non-empty string, got {value!r}")
    return value
