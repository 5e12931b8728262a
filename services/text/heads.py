"""Per-category linear heads and the TF-IDF vectoriser, as ONNX files in the model repository.

A heads file is a three-node graph `X [N, F] -> MatMul(weights [F, 7]) -> Add(bias [7]) -> Sigmoid ->
scores [N, 7]`, columns in `services.common.contracts.text.CATEGORIES` order, written by
`services/text/build/train_heads.py` from scikit-learn logistic regressions whose Platt calibration
(fit on the dev split) is folded into the weights. Being linear, a head's logit splits into
per-feature contributions (`Heads.weights`), which the models use to cite evidence.

The TF-IDF vectoriser (`text[N] string -> tfidf [N, V]`) is a skl2onnx export used by the fast heads.

Example::

    heads = Heads(find_model("text_heads_fast", root=Path("model_repository")), SessionOptions())
    heads.predict(np.zeros((2, heads.n_features), np.float32)).shape   # (2, 7)
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from services.common.contracts.text import CATEGORIES
from services.common.serving.model_repository import RepositoryEntry
from services.common.serving.onnx_session import SessionOptions, create_session

__all__ = ["HEADS_INPUT", "HEADS_OUTPUT", "Heads", "TfidfVectorizerModel"]

HEADS_INPUT = "X"
HEADS_OUTPUT = "scores"
WEIGHTS = "weights"
BIAS = "bias"


class Heads:
    """One heads file: `predict` runs a whole batch in one `session.run`. `columns`: how many heads it holds
    (the seven categories, or the modelled subcategories for a subcategory heads file)."""

    def __init__(self, entry: RepositoryEntry, options: SessionOptions, columns: int = len(CATEGORIES)) -> None:
        import onnx
        from onnx import numpy_helper

        self.entry = entry
        model = onnx.load(str(entry.path))
        initializers = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
        self.weights = np.asarray(initializers[WEIGHTS], dtype=np.float32)
        self.bias = np.asarray(initializers[BIAS], dtype=np.float32)
        if self.weights.shape[1] != columns:
            raise ValueError(f"{entry.path}: weights have {self.weights.shape[1]} columns, expected {columns}")
        self.columns = columns
        self.n_features = int(self.weights.shape[0])
        self._session = create_session(str(entry.path), options)

    def predict(self, features: np.ndarray) -> np.ndarray:
        """Calibrated scores [N, columns] for features [N, F]."""
        if features.shape[0] == 0:
            return np.zeros((0, self.columns), np.float32)
        if features.shape[1] != self.n_features:
            raise ValueError(f"{self.entry.name}: expected {self.n_features} features, got {features.shape[1]}")
        return np.asarray(self._session.run([HEADS_OUTPUT], {HEADS_INPUT: features.astype(np.float32)})[0],
                          dtype=np.float32)


class TfidfVectorizerModel:
    """The skl2onnx TF-IDF export: strings in, dense [N, V] float32 out."""

    def __init__(self, entry: RepositoryEntry, options: SessionOptions) -> None:
        self.entry = entry
        self._session = create_session(str(entry.path), options)
        self._input = self._session.get_inputs()[0].name
        self._output = self._session.get_outputs()[0].name
        import json

        vocabulary_file = entry.path.parent / str(entry.extra.get("vocabulary_file", "vocabulary.json"))
        self.vocabulary: tuple[str, ...] = tuple(json.loads(vocabulary_file.read_text(encoding="utf-8")))

    def transform(self, texts: Sequence[str]) -> np.ndarray:
        """TF-IDF rows for a batch (one `session.run`)."""
        if not texts:
            return np.zeros((0, len(self.vocabulary)), np.float32)
        return np.asarray(self._session.run([self._output], {self._input: np.array(list(texts), dtype=object)})[0],
                          dtype=np.float32)
