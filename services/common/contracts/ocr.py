"""The OCR modality's tensor contract.

* input `IMAGE` BYTES [N, 1]: encoded JPEG / PNG / WebP.
* output `LINES` BYTES [N, 1]: UTF-8 JSON list of {"text", "confidence", "polygon": [[x, y] * 4]}.
* output `ERROR` BYTES [N, 1]: b"" when the image was read, else why it was rejected (LINES is b"[]").
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from services.common.contracts.rows import MalformedRowError, row_json, row_text
from services.common.contracts.tensors import TensorSpec

INPUT = TensorSpec("IMAGE", "BYTES", (1,))
LINES = "LINES"
ERROR = "ERROR"
OUTPUTS: tuple[TensorSpec, ...] = (TensorSpec(LINES, "BYTES", (1,)), TensorSpec(ERROR, "BYTES", (1,)))
ROUTER_OUTPUTS: tuple[str, ...] = (LINES, ERROR)


@dataclass(frozen=True)
class OcrLine:
    """One line read from an image: its text, the recogniser's confidence (0..1) and its box (4 corner
    points (x, y) in original pixels). What the OCR pipeline produces and the router decodes."""

    text: str
    confidence: float
    polygon: tuple[tuple[int, int], ...]

    def to_json(self) -> dict[str, Any]:
        """The line as LINES encodes it: {"text", "confidence" (5 decimals), "polygon": [[x, y] * 4]}."""
        return {"text": self.text, "confidence": round(self.confidence, 5), "polygon": [list(p) for p in self.polygon]}


@dataclass(frozen=True)
class OcrRow:
    """One image's lines, or the reason it was rejected."""

    lines: tuple[OcrLine, ...]
    error: str


def encode_lines(lines: Sequence[OcrLine]) -> bytes:
    """The LINES value for one image (the model side)."""
    return json.dumps([line.to_json() for line in lines], ensure_ascii=False).encode("utf-8")


def decode_row(row: Mapping[str, np.ndarray]) -> OcrRow:
    """A typed OcrRow from one response row; MalformedRowError if it breaks the contract."""
    raw = row_json(row, LINES)
    if not isinstance(raw, list):
        raise MalformedRowError(f"output {LINES!r} must be a JSON list")
    try:
        lines = tuple(OcrLine(str(l["text"]), float(l["confidence"]), tuple((int(x), int(y)) for x, y in l["polygon"]))
                      for l in raw)
    except (KeyError, TypeError, ValueError) as error:
        raise MalformedRowError(f"output {LINES!r} has a malformed line ({error!r})") from None
    return OcrRow(lines, row_text(row, ERROR))
