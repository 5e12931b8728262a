"""What reading Chinese costs the fast text model, in process, printed as JSON.

    python -m bench.zh_cost                      # batch 16, 30 rounds, one thread

Texts: the naturalistic Chinese training messages (short, as users write them), cycled so every batch
differs. Reported: ms per text for `TextModerationModel.score` at the batch size with the multilingual
heads (as served) and without them (their scores replaced by zeros, the rest unchanged), the encoder and
heads alone, and the process's resident memory before and after the multilingual encoder is loaded.
Targets (issue 38): fast profile <= 1.5 ms per short Chinese text at batch 16; the Chinese path adds
<= 200 MB RSS. Compare numbers only within one run on a quiet machine (`foreign_cpu_share` near 0).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from bench.machine import CpuAccount, code_version
from services.common.serving.model_repository import DEFAULT_ROOT, find_model
from services.common.serving.onnx_session import SessionOptions

__all__ = ["main", "rss_mb"]

TARGET_MS = 1.5
TARGET_RSS_MB = 200.0


def rss_mb() -> float:
    """This process's resident set size in MB (Linux /proc)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _ms_per_text(run: Any, batches: Sequence[list[str]]) -> float:
    started = time.perf_counter()
    for batch in batches:
        run(batch)
    return round((time.perf_counter() - started) * 1000 / sum(len(b) for b in batches), 3)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.zh_cost", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repository", type=Path, default=DEFAULT_ROOT)
    args = parser.parse_args(argv)
    from services.text.build.natural_corpus import natural_rows
    from services.text.multilingual import ZH_CHARS_TFIDF, ZH_SEMANTIC_HEADS, MultilingualEncoder, ZhSemanticHeads

    texts = [str(r["text"]) for r in natural_rows("zh") if len(str(r["text"])) <= 60]
    batches = [[texts[(i * args.batch + k) % len(texts)] for k in range(args.batch)] for i in range(args.rounds)]
    options = SessionOptions(intra_op_threads=args.threads)
    before = rss_mb()
    encoder = MultilingualEncoder(threads=args.threads)
    encoder.warm()
    heads = ZhSemanticHeads(find_model(ZH_SEMANTIC_HEADS, root=args.repository),
                            find_model(ZH_CHARS_TFIDF, root=args.repository), options, encoder=encoder)
    heads.score(batches[0])
    after = rss_mb()
    from services.text.model import TextModerationModel

    model = TextModerationModel(args.repository, options)
    model.warmup()
    account = CpuAccount.start()
    with_heads = _ms_per_text(model.score, batches)
    heads_only = _ms_per_text(heads.score, batches)
    real = model._zh_semantic.score
    model._zh_semantic.score = lambda batch: np.zeros((len(batch), 7), np.float32)  # type: ignore[method-assign,assignment]
    without = _ms_per_text(model.score, batches)
    model._zh_semantic.score = real  # type: ignore[method-assign]
    report = {"command": " ".join(["python -m bench.zh_cost", *(argv if argv is not None else sys.argv[1:])]),
              "code": code_version(), "batch": args.batch, "texts": args.batch * args.rounds,
              "median_chars": float(np.median([len(t) for b in batches for t in b])), "threads": args.threads,
              "fast_ms_per_text": with_heads, "fast_without_multilingual_ms_per_text": without,
              "multilingual_heads_ms_per_text": heads_only,
              "multilingual_rss_mb": round(after - before, 1),
              "targets": {"fast_ms_per_text <= 1.5": with_heads <= TARGET_MS,
                          "multilingual_rss_mb <= 200": (after - before) <= TARGET_RSS_MB},
              "foreign_cpu_share": account.foreign_cpu_share()}
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
