"""Reading one row of a KServe response: the helpers every modality contract's `decode_row` uses.

A row is one item's slice of each output tensor (`{name: array of shape [1]}`), as the router's
dispatcher returns it. A malformed row raises `MalformedRowError`, which the router treats as the
stage failing (the service answered something the contract does not allow).
"""

from __future__ import annotations

import json
from typing import Any, Mapping

import numpy as np

__all__ = ["MalformedRowError", "row_bytes", "row_float", "row_json", "row_text"]


class MalformedRowError(ValueError):
    """A response row does not follow its modality's contract; the message names the output."""


def row_float(row: Mapping[str, np.ndarray], name: str) -> float:
    """The FP32 value of output `name`."""
    try:
        return float(row[name][0])
    except (KeyError, IndexError, TypeError, ValueError):
        raise MalformedRowError(f"output {name!r} is missing or not a number") from None


def row_bytes(row: Mapping[str, np.ndarray], name: str) -> bytes:
    """The BYTES value of output `name`."""
    try:
        value = row[name][0]
    except (KeyError, IndexError):
        raise MalformedRowError(f"output {name!r} is missing") from None
    if isinstance(value, (bytes, bytearray, np.bytes_)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    raise MalformedRowError(f"output {name!r} is {type(value).__name__}, not bytes")


def row_text(row: Mapping[str, np.ndarray], name: str) -> str:
    """The BYTES value of output `name` as UTF-8 text (undecodable bytes replaced)."""
    return row_bytes(row, name).decode("utf-8", "replace")


def row_json(row: Mapping[str, np.ndarray], name: str) -> Any:
    """The BYTES value of output `name`, parsed as JSON."""
    try:
        return json.loads(row_bytes(row, name))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise MalformedRowError(f"output {name!r} is not JSON ({error})") from None
