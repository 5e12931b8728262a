"""Latency of `ImageSafetyModel.infer` (decode + preprocess + both ONNX models), in-process, on CPU.

For each intra-op thread count and batch size, times whole `infer` calls on 640x427 JPEG photos
(scikit-learn's china.jpg and flower.jpg, alternating) and splits one batch into its stages.

Example::

    python -m bench.vision_latency --threads 1 2 --batch 1 8 --repeats 20
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import time
from functools import partial
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from services.common.serving.model_repository import DEFAULT_ROOT
from services.common.serving.onnx_session import SessionOptions
from services.vision.decode import DecodedImage, decode_batch
from services.vision.model import ImageSafetyModel
from services.vision.networks import IMAGE_SAFETY_S, OPENNSFW, load_network
from services.vision.preprocess import stack


def _photos() -> list[bytes]:
    spec = importlib.util.find_spec("sklearn")
    root = Path(list(spec.submodule_search_locations or [])[0]) if spec else Path()
    return [(root / "datasets" / "images" / name).read_bytes() for name in ("china.jpg", "flower.jpg")]


def _ms(fn: Callable[[], object], repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return times


def _stages(root: Path, options: SessionOptions, items: list[bytes], repeats: int) -> str:
    """Milliseconds per batch for decode, each preprocessing and each session.run."""
    decoded = [o.rgb for o in decode_batch(items) if isinstance(o, DecodedImage)]
    parts: dict[str, Callable[[], object]] = {"decode": partial(decode_batch, items)}
    for spec in (OPENNSFW, IMAGE_SAFETY_S):
        network = load_network(root, spec, options)
        batch = stack([network.preprocess(rgb) for rgb in decoded])
        parts[f"prep_{spec.name}"] = partial(lambda n, images: [n.preprocess(i) for i in images], network, decoded)
        parts[f"onnx_{spec.name}"] = partial(network.session.run, [network.output_name], {network.input_name: batch})
    return "  ".join(f"{name} {statistics.median(_ms(fn, repeats)):.1f}" for name, fn in parts.items())


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repository", type=Path, default=DEFAULT_ROOT)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args(argv)
    for name in ("threads", "batch"):
        if min(getattr(args, name)) < 1:
            parser.error(f"--{name} values must be >= 1, got {getattr(args, name)}")
    if args.repeats < 1:
        parser.error(f"--repeats must be >= 1, got {args.repeats}")
    photos = _photos()
    for threads in args.threads:
        options = SessionOptions(intra_op_threads=threads)
        model = ImageSafetyModel(args.repository, options)
        model.warmup()
        for size in args.batch:
            items = [photos[i % len(photos)] for i in range(size)]
            tensor = np.empty((size, 1), dtype=np.object_)
            tensor[:, 0] = items
            cpu_start = time.process_time()
            times = sorted(_ms(partial(model.infer, {"IMAGE": tensor}), args.repeats))
            # CPU time is less disturbed than wall time when other processes share the cores.
            cpu = (time.process_time() - cpu_start) * 1000 / args.repeats
            p50, p95 = statistics.median(times), times[min(len(times) - 1, int(0.95 * len(times)))]
            print(f"threads={threads} batch={size}: p50 {p50:.1f} ms  p95 {p95:.1f} ms  ({p50 / size:.1f} ms/image)"
                  f"  cpu {cpu:.1f} ms/batch")
            print(f"    stages (ms/batch, median): {_stages(args.repository, options, items, max(3, args.repeats // 4))}")


if __name__ == "__main__":
    main()
