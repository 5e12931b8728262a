"""Declarative configuration: YAML files loaded into frozen dataclasses, with errors that name the file
and the key.

`load_dataclass(cls, data, source)` builds nested frozen dataclasses from plain mappings. It rejects
unknown keys (typos must not pass silently), checks scalar types, fills defaults, and re-raises any
ValueError/TypeError from a dataclass's `__post_init__` as a ConfigError naming the key path.

Example::

    config = load_yaml_file(Path("config/text.yaml"), ModalityServiceConfig)
    # ConfigError: config/text.yaml: batching.max_batch_size: must be >= 1, got 0
"""

from __future__ import annotations

import collections.abc
import dataclasses
import types
import typing
from pathlib import Path
from typing import Any, Mapping, TypeVar

import yaml

C = TypeVar("C")


class ConfigError(ValueError):
    """A configuration file is invalid. `str()` reads '<file>: <key.path>: <problem>'."""

    def __init__(self, source: str, key: str, problem: str) -> None:
        self.source, self.key, self.problem = source, key, problem
        super().__init__(f"{source}: {key or '<top level>'}: {problem}")


class FieldError(ValueError):
    """Raised by a dataclass's `__post_init__` for a problem with one of its keys (or a key below them):
    `load_dataclass` reports it at that key's path. Example: `raise FieldError("categories.toxicity", "...")`."""

    def __init__(self, key: str, problem: str) -> None:
        self.key, self.problem = key, problem
        super().__init__(f"{key}: {problem}")


def read_yaml(path: Path) -> Any:
    """Parse a YAML file; syntax errors become ConfigError with the line number."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(str(path), "", f"cannot read file: {exc.strerror}") from None
    try:
        return yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else "syntax"
        raise ConfigError(str(path), where, f"invalid YAML: {getattr(exc, 'problem', exc)}") from None


def load_yaml_file(path: Path, cls: type[C]) -> C:
    """Read `path` and build `cls` from it (see module docstring)."""
    return load_dataclass(cls, read_yaml(path), str(path))


def load_dataclass(cls: type[C], data: Any, source: str, prefix: str = "") -> C:
    """Build dataclass `cls` from mapping `data`; errors name `source` and the dotted key path."""
    if not isinstance(data, Mapping):
        raise ConfigError(source, prefix, f"expected a mapping, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(map(str, data)) - set(fields))
    if unknown:
        raise ConfigError(source, _join(prefix, unknown[0]), f"unknown key; expected one of {sorted(fields)}")
    values: dict[str, Any] = {}
    for name, field in fields.items():
        key = _join(prefix, name)
        if name in data:
            values[name] = _convert(hints[name], data[name], source, key)
        elif field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            raise ConfigError(source, key, "required key is missing")
    try:
        return cls(**values)
    except (ValueError, TypeError) as exc:
        if isinstance(exc, ConfigError):
            raise
        if isinstance(exc, FieldError):
            raise ConfigError(source, _join(prefix, exc.key), exc.problem) from None
        raise ConfigError(source, prefix, str(exc)) from None


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _convert(hint: Any, value: Any, source: str, key: str) -> Any:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        options = [a for a in args if a is not type(None)]
        return _convert(options[0], value, source, key)
    if dataclasses.is_dataclass(hint):
        return load_dataclass(hint, value, source, key)  # type: ignore[arg-type]
    if origin in (dict, collections.abc.Mapping) or hint is dict:
        if not isinstance(value, Mapping):
            raise ConfigError(source, key, f"expected a mapping, got {type(value).__name__}")
        key_type, value_type = args or (str, Any)
        return {_convert(key_type, k, source, key): _convert(value_type, v, source, f"{key}.{k}") for k, v in value.items()}
    if origin in (tuple, list, collections.abc.Sequence) or hint in (tuple, list):
        if not isinstance(value, list):
            raise ConfigError(source, key, f"expected a list, got {type(value).__name__}")
        item_type = args[0] if args else Any
        return tuple(_convert(item_type, v, source, f"{key}[{i}]") for i, v in enumerate(value))
    if origin is typing.Literal:
        if value not in args:
            raise ConfigError(source, key, f"must be one of {list(args)}, got {value!r}")
        return value
    if hint is Any:
        return value
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if hint in (int, float, str, bool) and (type(value) is not hint):
        raise ConfigError(source, key, f"expected {hint.__name__}, got {type(value).__name__} {value!r}")
    return value
