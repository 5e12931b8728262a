"""One ONNX text classifier from the model repository: a batch of strings in, P(positive) out.

The repository entry's `extra` says how to call it: `input` / `output` tensor names, the column of the
positive class, and `preprocessing` ("raw" or "normalize"), which tells the caller which text to pass
(the build script chose it by measurement and recorded it).

Example::

    classifier = TextClassifier(find_model("spam_en", root=Path("model_repository")), SessionOptions())
    classifier.predict(["WINNER!! claim your prize now"])  # array([0.98], dtype=float32)
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from services.common.serving.model_repository import RepositoryEntry
from services.common.serving.onnx_session import SessionOptions, create_session

__all__ = ["PREPROCESSING", "TextClassifier"]

PREPROCESSING = ("raw", "normalize")


class TextClassifier:
    """Wraps one ONNX Runtime session; `predict` runs a whole batch in one `session.run`."""

    def __init__(self, entry: RepositoryEntry, options: SessionOptions) -> None:
        self.entry = entry
        self.input_name = str(entry.extra.get("input", "text"))
        self.output_name = str(entry.extra.get("output", "probabilities"))
        self.positive_index = int(entry.extra.get("positive_index", 1))
        self.preprocessing = str(entry.extra.get("preprocessing", "raw"))
        if self.preprocessing not in PREPROCESSING:
            raise ValueError(f"{entry.name} config: preprocessing {self.preprocessing!r} is not one of {PREPROCESSING}")
        self._session = create_session(str(entry.path), options)

    def predict(self, texts: Sequence[str]) -> np.ndarray:
        """P(positive class) for each text, float32 of shape [len(texts)]."""
        if not texts:
            return np.zeros((0,), np.float32)
        batch = np.array(list(texts), dtype=object)
        probabilities = self._session.run([self.output_name], {self.input_name: batch})[0]
        return np.asarray(probabilities[:, self.positive_index], dtype=np.float32)
