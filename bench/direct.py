"""The `direct` baseline: the served models called in this process with ONNX Runtime, no RPC at all.

Each model is built exactly as its service builds it (`services.<modality>.server.served_models` over
the shipped `config/<modality>.yaml`, so the same SessionOptions: 1 intra-op thread), then `infer` is
timed back to back at several batch sizes by one caller thread. The best items/s is the physical
limit of that model on this machine at that thread setting; the batch-1 time is the model's own
latency for one item.

An image item costs vision + OCR + text for its OCR lines, run one after the other here (the mesh
runs vision and OCR side by side, on the second core), so `item_seconds` adds them up.

Example::

    result = measure_direct(BenchInputs.build(), DirectPlan.quick(), {"text": 50.0, "image": 1000.0})
    result["text"]["best_items_per_s"]      # e.g. 7400.0
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from bench.payloads import BenchInputs
from services.common.serving.model_api import ServedModel
from services.common.serving.modality_config import load_service_config
from services.launcher import ROOT

INPUT_NAMES = {"text": "TEXT", "vision": "IMAGE", "ocr": "IMAGE"}


@dataclass(frozen=True)
class DirectPlan:
    """Batch sizes to try per modality and how long to time each (at least one batch)."""

    batch_sizes: Mapping[str, Sequence[int]]
    seconds_per_size: float

    @classmethod
    def full(cls) -> DirectPlan:
        return cls({"text": (1, 8, 16, 32, 64), "vision": (1, 4, 8, 16), "ocr": (1, 2, 4, 8)}, 1.5)

    @classmethod
    def quick(cls) -> DirectPlan:
        return cls({"text": (1, 32), "vision": (1, 4), "ocr": (1, 2)}, 0.2)


def load_model(modality: str) -> ServedModel:
    """The model of `modality`, built as its service builds it from `config/<modality>.yaml`."""
    config = load_service_config(ROOT / "config" / f"{modality}.yaml")
    if not Path(config.model_repository).is_absolute():
        config = replace(config, model_repository=str(ROOT / config.model_repository))
    if modality == "text":
        from services.text.server import served_models
    elif modality == "vision":
        from services.vision.server import served_models
    else:
        from services.ocr.server import served_models
    return served_models(config)[0]


def _batch(modality: str, pool: Sequence[bytes], size: int) -> dict[str, np.ndarray]:
    column = np.empty((size, 1), dtype=np.object_)
    column[:, 0] = [pool[i % len(pool)] for i in range(size)]
    return {INPUT_NAMES[modality]: column}


def time_batches(model: ServedModel, inputs: dict[str, np.ndarray], seconds: float) -> dict[str, float]:
    """Run `inputs` once untimed, then repeatedly for at least `seconds` (and once); items/s and ms per batch."""
    model.infer(inputs)
    size = next(iter(inputs.values())).shape[0]
    runs, started = 0, time.perf_counter()
    while runs == 0 or time.perf_counter() - started < seconds:
        model.infer(inputs)
        runs += 1
    elapsed = time.perf_counter() - started
    return {"items_per_s": round(runs * size / elapsed, 1), "ms_per_batch": round(elapsed / runs * 1000, 3), "runs": runs}


def sweep_model(modality: str, model: ServedModel, pool: Sequence[bytes], plan: DirectPlan,
                max_batch_ms: float) -> dict[str, Any]:
    """Items/s at each planned batch size, the best one whose batch takes at most `max_batch_ms` (the
    SLO: a bigger batch would be faster per item but too slow per call), and the batch-1 latency."""
    sizes = [s for s in plan.batch_sizes[modality] if s <= model.max_batch_size]
    by_size = {size: time_batches(model, _batch(modality, pool, size), plan.seconds_per_size) for size in sizes}
    within = [s for s in by_size if by_size[s]["ms_per_batch"] <= max_batch_ms] or [min(by_size)]
    best = max(within, key=lambda s: by_size[s]["items_per_s"])
    return {"by_batch_size": {str(s): r for s, r in by_size.items()}, "best_batch_size": best,
            "best_items_per_s": by_size[best]["items_per_s"],
            "batch1_ms": by_size[1]["ms_per_batch"] if 1 in by_size else None}


def ocr_lines(model: ServedModel, images: Sequence[bytes]) -> list[str]:
    """The text of every line OCR reads in `images` (what the text model then gets)."""
    out = model.infer(_batch("ocr", images, len(images)))
    return [line["text"] for row in out["LINES"][:, 0] for line in json.loads(bytes(row))]


def measure_direct(inputs: BenchInputs, plan: DirectPlan, slo_p99_ms: Mapping[str, float]) -> dict[str, Any]:
    """The direct baseline per modality, plus seconds per `text` and `image` item at the best batch sizes.

    `slo_p99_ms` (by item kind) caps the batch time: text batches by the text SLO, vision and OCR
    batches by the image SLO."""
    result: dict[str, Any] = {}
    lines: list[str] = []
    for modality in ("text", "vision", "ocr"):
        model = load_model(modality)  # time_batches warms each batch size itself
        pool = inputs.texts if modality == "text" else inputs.images
        slo_ms = slo_p99_ms["text" if modality == "text" else "image"]
        result[modality] = sweep_model(modality, model, pool, plan, slo_ms)
        if modality == "ocr":
            lines = ocr_lines(model, inputs.images)
        del model  # free its sessions before the next model loads
    per_text = 1.0 / result["text"]["best_items_per_s"]
    lines_per_image = len(lines) / len(inputs.images)
    per_image = 1.0 / result["vision"]["best_items_per_s"] + 1.0 / result["ocr"]["best_items_per_s"] + lines_per_image * per_text
    result["ocr_lines_per_image"] = round(lines_per_image, 2)
    result["item_seconds"] = {"text": per_text, "image": per_image}
    return result


def direct_capacity(item_seconds: Mapping[str, float], kinds: Mapping[str, float]) -> float:
    """Items/s of a mix in process: 1 / sum(share x seconds per item) over the mix's kinds.

    Example::

        >>> direct_capacity({"text": 0.001, "image": 0.2}, {"text": 0.9, "image": 0.1})
        47.85
    """
    total = sum(kinds.values())
    seconds = sum(share / total * item_seconds[kind] for kind, share in kinds.items())
    return round(1.0 / seconds, 2)
