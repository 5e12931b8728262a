"""Where an image's time goes: decoding, and each OCR stage (detection, angle classification,
recognition), per image, in this process at the service's threads. Prints JSON.

    python -m bench.ocr_stages [--repeats 15] [--threads 1]

Images: the mesh benchmark's (640x480, two rendered lines on a noisy background: bench/payloads.py),
a 1280x960 version of one of them, and text-free images (a photo-like 640x480 and a flat 96x96), so
the report shows what each stage costs and what an image with no text region costs. Decoding is
timed on its own (the vision and OCR services each decode the same bytes: the report's
`decode_ms` is what sharing one decoded copy between them could save at most, per image).
Medians over `--repeats` runs, interleaved across images so a shared machine's load spreads evenly.
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
from PIL import Image
from rapidocr.utils.process_img import get_rotate_crop_image

from bench.payloads import BenchInputs
from services.common.image_decode import decode_rgb
from services.common.serving.model_repository import DEFAULT_ROOT
from services.common.serving.onnx_session import SessionOptions
from services.ocr.model import OcrModel
from services.ocr.pipeline import _prepare
from bench.render import render_photo_like


def _images() -> dict[str, bytes]:
    bench = BenchInputs.build(images=2)
    large = io.BytesIO()
    Image.open(io.BytesIO(bench.images[0])).resize((1280, 960)).save(large, format="PNG")
    flat = io.BytesIO()
    Image.new("RGB", (96, 96), (200, 180, 160)).save(flat, format="PNG")
    return {"bench_640x480_a": bench.images[0], "bench_640x480_b": bench.images[1],
            "bench_1280x960": large.getvalue(), "photo_640x480_no_text": render_photo_like(seed=3),
            "flat_96x96_no_text": flat.getvalue()}


def _time_ms(run: Callable[[], object]) -> float:
    start = time.perf_counter()
    run()
    return (time.perf_counter() - start) * 1000.0


def stages(model: OcrModel, data: bytes) -> dict[str, float]:
    """Milliseconds of each stage for one image (one run), and how many lines detection found."""
    pipeline = model._pipeline
    timings: dict[str, float] = {}
    start = time.perf_counter()
    rgb = decode_rgb(data)
    timings["decode_ms"] = (time.perf_counter() - start) * 1000.0
    start = time.perf_counter()
    prepared = _prepare(rgb)
    boxes = pipeline._detector.detect([prepared.image])[0]
    timings["detect_ms"] = (time.perf_counter() - start) * 1000.0
    crops = [get_rotate_crop_image(prepared.image, box.copy()) for box in boxes]
    timings["lines"] = float(len(crops))
    timings["classify_ms"] = _time_ms(lambda: pipeline._classifier.upright(crops)) if crops else 0.0
    timings["recognize_ms"] = _time_ms(lambda: pipeline._recognizer.recognize(crops)) if crops else 0.0
    timings["infer_ms"] = _time_ms(lambda: model.infer({"IMAGE": np.array([[data]], dtype=object)}))
    return timings


def measure(threads: int, repeats: int, repository: Path = DEFAULT_ROOT) -> dict[str, Any]:
    model = OcrModel(repository, SessionOptions(intra_op_threads=threads, inter_op_threads=1))
    model.warmup()
    images = _images()
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in images}
    for _ in range(repeats):
        for name, data in images.items():
            runs[name].append(stages(model, data))
    report = {name: {key: round(statistics.median(run[key] for run in rows), 2) for key in rows[0]}
              for name, rows in runs.items()}
    return {"threads": threads, "repeats": repeats, "settings": vars(model._pipeline.settings), "images": report}


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ocr_stages", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    print(json.dumps(measure(args.threads, args.repeats), indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
