"""The served text models run in process, exactly as the text service runs them: what the quality
evaluators (`bench.quality`, `bench.probes`, `bench.accuracy`, ...) share.

Example::

    model = load_model(FAST_MODEL, DEFAULT_ROOT)
    rows = score(model, ["hello", "you idiot"]).rows
"""

from __future__ import annotations

import importlib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Protocol, Sequence

import numpy as np

from services.common.contracts import text as contract
from services.common.serving.onnx_session import SessionOptions
from services.router.profiles import FAST_MODEL, SEMANTIC_MODEL

__all__ = ["MODEL_CLASSES", "Scored", "TextModel", "load_model", "score"]

#: Where each served text model's class lives ("module:Class"); both take (repository, SessionOptions).
MODEL_CLASSES = {FAST_MODEL: "services.text.model:TextModerationModel",
                 SEMANTIC_MODEL: "services.text.semantic:TextSemanticModel"}

class TextModel(Protocol):
    max_batch_size: int

    def infer(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]: ...


def load_model(name: str, repository: Path) -> TextModel:
    """The served model `name`, built as the text service builds it (one intra-op thread)."""
    module, _, cls = MODEL_CLASSES[name].partition(":")
    model: TextModel = getattr(importlib.import_module(module), cls)(repository, SessionOptions(intra_op_threads=1))
    return model


@dataclass
class Scored:
    """One model's rows for a list of texts and the seconds it took."""

    rows: list[contract.TextRow]
    seconds: float


def score(model: TextModel, texts: Sequence[str]) -> Scored:
    """Typed rows for `texts`, in batches of the model's max batch size, exactly as served."""
    rows: list[contract.TextRow] = []
    started = time.perf_counter()
    step = max(1, int(model.max_batch_size))
    for start in range(0, len(texts), step):
        batch = np.array([[t.encode("utf-8")] for t in texts[start:start + step]], dtype=object)
        out = model.infer({contract.INPUT.name: batch})
        rows.extend(contract.decode_row({name: out[name][i] for name in contract.ROUTER_OUTPUTS})
                    for i in range(batch.shape[0]))
    return Scored(rows, time.perf_counter() - started)
