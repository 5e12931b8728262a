"""What a long English text costs each text model, in process, printed as JSON (issue 39: <= 15 ms per KB).

    python -m bench.long_text_cost                      # 1, 4 and 16 KB texts, 5 rounds, one thread

Texts: naturalistic English training messages joined with blank lines until a text reaches its size
(so every window reads real sentences), one text per call, as the router sends a long post. Both models
read such a text in windows (`services/text/windows.py`); reported per size and model: ms per text,
ms per KB and the number of windows. Compare numbers only within one run on a quiet machine
(`foreign_cpu_share` near 0).
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
from services.common.serving.model_repository import DEFAULT_ROOT
from services.common.serving.onnx_session import SessionOptions

__all__ = ["TARGET_MS_PER_KB", "long_texts", "main"]

TARGET_MS_PER_KB = 15.0


def long_texts(messages: Sequence[str], size_bytes: int, count: int) -> list[str]:
    """`count` texts of about `size_bytes` UTF-8 bytes each, joined from `messages` in turn (each text
    starts where the previous one stopped, so they differ).

    Example::

        >>> [len(t.encode()) >= 10 for t in long_texts(["hello there.", "see you."], 10, 2)]
        [True, True]
    """
    if not messages:
        raise ValueError("messages: need at least one")
    out: list[str] = []
    position = 0
    for _ in range(count):
        parts: list[str] = []
        while len("\n\n".join(parts).encode("utf-8")) < size_bytes:
            parts.append(messages[position % len(messages)])
            position += 1
        out.append("\n\n".join(parts))
    return out


def _ms_per_text(model: Any, texts: Sequence[str]) -> float:
    started = time.perf_counter()
    for text in texts:
        model.infer({"TEXT": np.array([[text.encode("utf-8")]], dtype=object)})
    return (time.perf_counter() - started) * 1000 / len(texts)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.long_text_cost", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes-kb", type=float, nargs="+", default=[1.0, 4.0, 16.0])
    parser.add_argument("--rounds", type=int, default=5, help="texts per size and model")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repository", type=Path, default=DEFAULT_ROOT)
    args = parser.parse_args(argv)
    from services.text.build.natural_corpus import natural_rows
    from services.text.model import TextModerationModel
    from services.text.semantic import TextSemanticModel
    from services.text.windows import cut

    messages = [str(r["text"]) for r in natural_rows("en") if not r["labels"]]
    options = SessionOptions(intra_op_threads=args.threads)
    fast = TextModerationModel(args.repository, options)
    semantic = TextSemanticModel(args.repository, options, fast=fast)
    semantic.warmup()
    account = CpuAccount.start()
    sizes = []
    for size_kb in args.sizes_kb:
        texts = long_texts(messages, int(size_kb * 1024), args.rounds)
        kb = float(np.mean([len(t.encode("utf-8")) for t in texts])) / 1024
        row: dict[str, Any] = {"kb": round(kb, 2), "windows": float(np.mean([len(cut(t)) for t in texts]))}
        for name, model in (("fast", fast), ("accurate", semantic)):
            ms = _ms_per_text(model, texts)
            row[name] = {"ms_per_text": round(ms, 2), "ms_per_kb": round(ms / kb, 2)}
        sizes.append(row)
    worst = max(row[name]["ms_per_kb"] for row in sizes for name in ("fast", "accurate"))
    report = {"command": " ".join(["python -m bench.long_text_cost", *(argv if argv is not None else sys.argv[1:])]),
              "code": code_version(), "threads": args.threads, "rounds": args.rounds, "sizes": sizes,
              "targets": {f"ms_per_kb <= {TARGET_MS_PER_KB:g} (every size, both models)": worst <= TARGET_MS_PER_KB},
              "foreign_cpu_share": account.foreign_cpu_share()}
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
