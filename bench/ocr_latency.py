"""Measure OcrModel.infer latency against rapidocr's own engine (a development tool, not served code).

Renders 640x480 images with two text lines (bench/render.py, needs fonts-wqy-zenhei), then
reports the median and minimum per-image time of `OcrModel.infer` at batch 1 and 4, the rapidocr engine on the
same images one at a time (with its own ONNX Runtime session options, and with sessions made by
`create_session` like the service's), and detector grouping "shape" vs "pad" on a batch of mixed sizes.
Run from the repository root::

    python -m bench.ocr_latency --threads 1 2
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from services.common.serving.model_repository import DEFAULT_ROOT, find_model
from services.common.serving.onnx_session import SessionOptions, create_session
from services.ocr.model import OcrModel
from services.ocr.settings import OcrSettings

LINES = (["Hello world 2026", "内容审核测试"], ["免费领取 加微信", "Call 400-123-4567"],
         ["限时优惠 50% OFF", "扫码关注公众号"], ["The quick brown fox", "加我好友送红包"])


def _interleaved_ms(runs: dict[str, tuple[Callable[[], object], int]], repeats: int) -> dict[str, tuple[float, float]]:
    """(median, min) milliseconds per image for each run; rounds interleave the runs so that load
    from other processes on a shared machine spreads over all of them alike."""
    for run, _ in runs.values():
        run()
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, (run, images) in runs.items():
            start = time.perf_counter()
            run()
            times[name].append((time.perf_counter() - start) * 1000 / images)
    return {name: (statistics.median(t), min(t)) for name, t in times.items()}


def _images(sizes: Sequence[tuple[int, int]]) -> list[bytes]:
    from bench.render import render_text_image

    return [render_text_image(LINES[i % len(LINES)], size) for i, size in enumerate(sizes)]


def _batch(images: Sequence[bytes]) -> dict[str, np.ndarray]:
    return {"IMAGE": np.array([[image] for image in images], dtype=object)}


def measure(repository: Path, threads: int, repeats: int) -> dict[str, tuple[float, float]]:
    """(median, min) milliseconds per image for each configuration, at `threads` intra-op threads."""
    from rapidocr import RapidOCR

    images = _images([(640, 480)] * 4)
    mixed = _images([(640, 480), (480, 640), (800, 600), (640, 360)])
    options = SessionOptions(intra_op_threads=threads)
    model = OcrModel(repository, options)
    padded = OcrModel(repository, options, OcrSettings(det_grouping="pad"))
    params = {"Det.limit_type": "max", "Det.limit_side_len": 960, "Global.log_level": "error",
              "EngineConfig.onnxruntime.intra_op_num_threads": threads, "EngineConfig.onnxruntime.inter_op_num_threads": 1}
    engine, engine_ours = RapidOCR(params=params), RapidOCR(params=params)
    # Same engine, with its sessions swapped for ones made like the service's (no spinning, arena on).
    loaders: dict[str, Callable[[], Any]] = {"ppocr_det": engine_ours._load_det_model,
                                             "ppocr_cls": engine_ours._load_cls_model,
                                             "ppocr_rec": engine_ours._load_rec_model}
    for name, load in loaders.items():
        load().session.session = create_session(str(find_model(name, "1", repository).path), options)
    return _interleaved_ms({
        "OcrModel.infer b1": (lambda: model.infer(_batch(images[:1])), 1),
        "OcrModel.infer b4": (lambda: model.infer(_batch(images)), 4),
        "rapidocr engine, 1 image per call": (lambda: [engine(image) for image in images], 4),
        "rapidocr engine, service's session options": (lambda: [engine_ours(image) for image in images], 4),
        "OcrModel b4 mixed sizes, grouping=shape": (lambda: model.infer(_batch(mixed)), 4),
        "OcrModel b4 mixed sizes, grouping=pad": (lambda: padded.infer(_batch(mixed)), 4),
    }, repeats)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="OCR latency: OcrModel vs the rapidocr engine.")
    parser.add_argument("--repository", type=Path, default=DEFAULT_ROOT)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args(argv)
    for threads in args.threads:
        for name, (median, best) in measure(args.repository, threads, args.repeats).items():
            print(f"threads={threads}  {name:44s} median {median:6.1f}  min {best:6.1f} ms/image")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
