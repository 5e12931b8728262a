"""Compact, exactly reproducible forms of the two large trained tensors sets (no PyTorch, numpy only).

The tuned MiniLM and the static token table are the only trained artifacts too large to commit as
they are (90 MB and 47 MB of float32). Training therefore *serves* what it can commit:

* the tuned encoder's weights are `base + float32(delta)` with a float16 `delta` (`float16_delta`): the
  fine-tune moves the weights by small amounts, so this keeps them to about 1e-7 absolute; only the
  tensors that moved are stored;
* the static table is stored as int8 per row with one float32 scale per row (`quantize_rows`).

Training writes these compact forms itself (`delta.npz`, `table.npz` beside the served model) and serves
what they decode to *before* anything downstream is trained (the heads, the static table), so what
`make train` evaluated is bit for bit what `make models` rebuilds from them: numpy's float16/int8 to
float32 conversions and float32 additions are exact, deterministic IEEE operations.

Example::

    deltas = float16_delta(base, tuned)               # committed (float16, moved tensors only)
    served = {**base, **apply_delta(base, deltas)}    # what is served and trained on downstream
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

__all__ = ["apply_delta", "dequantize_rows", "float16_delta", "quantize_rows"]

_INT8_MAX = 127.0


def float16_delta(base: Mapping[str, np.ndarray], tuned: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """`float16(tuned - base)` for every tensor of `tuned` whose delta is not all zero."""
    out: dict[str, np.ndarray] = {}
    for name, weights in tuned.items():
        if name not in base:
            raise KeyError(f"tuned tensor {name!r} has no base tensor")
        reference = np.asarray(base[name], dtype=np.float32)
        if reference.shape != weights.shape:
            raise ValueError(f"{name}: tuned shape {weights.shape} differs from base {reference.shape}")
        delta = (np.asarray(weights, dtype=np.float32) - reference).astype(np.float16)
        if np.any(delta):
            out[name] = delta
    return out


def apply_delta(base: Mapping[str, np.ndarray], deltas: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The served tensors named in `deltas`: `base + float32(delta)`."""
    return {name: np.asarray(base[name], dtype=np.float32) + np.asarray(delta, dtype=np.float16).astype(np.float32)
            for name, delta in deltas.items()}


def quantize_rows(table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(int8 [V, D], float32 scale [V]) with `table[i] ~ codes[i] * scale[i]` (absmax per row)."""
    table = np.asarray(table, dtype=np.float32)
    scale = (np.abs(table).max(axis=1) / _INT8_MAX).astype(np.float32)
    safe = np.where(scale > 0, scale, np.float32(1.0))
    codes = np.clip(np.rint(table / safe[:, None]), -_INT8_MAX, _INT8_MAX).astype(np.int8)
    return codes, scale


def dequantize_rows(codes: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """The float32 table `quantize_rows` stands for (exact and deterministic)."""
    return codes.astype(np.float32) * np.asarray(scale, dtype=np.float32)[:, None]
