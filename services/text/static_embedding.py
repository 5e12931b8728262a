"""Static token-vector sentence embeddings (`static_en`) for the fast heads, on ONNX Runtime.

`static_en` (built by services/text/build/static_vectors.py) maps each WordPiece of the MiniLM
vocabulary to the tuned encoder's vector for that token alone; a text's embedding is the
L2-normalised sum of its tokens' vectors, computed by the entry's ONNX graph (Gather, masked sum,
normalise). No transformer runs: a batch costs one tokenizer call and one small `session.run`
(~40 µs per short text), so the fast profile reads meaning, not only the training rows' words.
Like MiniLM in `text_semantic`, it reads only a text's non-CJK characters (CJK blanked): the vectors
and the heads on them are English, and on mixed Chinese text they scored noise (zh test split:
sexual precision 0.96 -> 0.54 before the blanking).

Example::

    embedder = StaticEmbedder(find_model("static_en", root=Path("model_repository")), SessionOptions())
    embedder.embed(["you are an idiot", ""]).shape   # (2, 384); the empty text's row is all zeros
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from services.common.serving.model_repository import RepositoryEntry
from services.common.serving.onnx_session import SessionOptions, create_session
from services.common.text_match.scripts import blank_han
from services.text.embedding import DIMENSION, load_tokenizer

__all__ = ["EMBEDDING_OUTPUT", "INPUT_IDS", "MASK", "STATIC_MODEL", "StaticEmbedder"]

STATIC_MODEL = "static_en"
INPUT_IDS = "input_ids"
MASK = "attention_mask"
EMBEDDING_OUTPUT = "embedding"


class StaticEmbedder:
    """The `static_en` session and the MiniLM tokenizer beside it (no special tokens)."""

    def __init__(self, entry: RepositoryEntry, options: SessionOptions) -> None:
        self.entry = entry
        self._tokenizer = load_tokenizer(entry)
        self._session = create_session(str(entry.path), options)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """[N, 384] unit-length rows (zeros for a text with no non-CJK token), one `session.run` per batch."""
        if not texts:
            return np.zeros((0, DIMENSION), np.float32)
        encodings = self._tokenizer.encode_batch([blank_han(t) for t in texts], add_special_tokens=False)
        width = max(1, max(len(e.ids) for e in encodings))
        ids = np.zeros((len(encodings), width), np.int64)
        mask = np.zeros((len(encodings), width), np.int64)
        for row, encoding in enumerate(encodings):
            ids[row, :len(encoding.ids)] = encoding.ids
            mask[row, :len(encoding.ids)] = encoding.attention_mask
        return np.asarray(self._session.run([EMBEDDING_OUTPUT], {INPUT_IDS: ids, MASK: mask})[0], dtype=np.float32)
