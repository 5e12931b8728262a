"""The vision modality's tensor contract.

* input `IMAGE` BYTES [N, 1]: encoded JPEG / PNG / WebP.
* output `SEXUAL` FP32 [N, 1], `VIOLENCE` FP32 [N, 1]: calibrated scores for those categories.
* output `DETAILS` BYTES [N, 1]: JSON {"width","height","format","raw":{...}} (diagnostics; the
  router does not ask for it).
* output `ERROR` BYTES [N, 1]: b"" when the item was scored, else why it was rejected (scores are 0).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from services.common.contracts.rows import row_float, row_text
from services.common.contracts.tensors import TensorSpec

INPUT = TensorSpec("IMAGE", "BYTES", (1,))
SCORE_OUTPUTS: Mapping[str, str] = {"SEXUAL": "sexual", "VIOLENCE": "violence"}
DETAILS = "DETAILS"
ERROR = "ERROR"
OUTPUTS: tuple[TensorSpec, ...] = (*(TensorSpec(name, "FP32", (1,)) for name in SCORE_OUTPUTS),
                                   TensorSpec(DETAILS, "BYTES", (1,)), TensorSpec(ERROR, "BYTES", (1,)))
ROUTER_OUTPUTS: tuple[str, ...] = (*SCORE_OUTPUTS, ERROR)


@dataclass(frozen=True)
class VisionRow:
    """One image's answer: category scores, or the reason it was rejected."""

    scores: dict[str, float]
    error: str


def decode_row(row: Mapping[str, np.ndarray]) -> VisionRow:
    """A typed VisionRow from one response row; MalformedRowError if it breaks the contract."""
    return VisionRow({category: row_float(row, name) for name, category in SCORE_OUTPUTS.items()}, row_text(row, ERROR))
