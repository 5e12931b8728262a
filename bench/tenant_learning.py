"""How fast a tenant classifier learns from labelled examples (issue 40), printed as JSON.

    python -m bench.tenant_learning                       # learning curves, both languages
    python -m bench.tenant_learning --timing 25000        # also: import + train 25,000 examples (target <= 5 min)

Learning curves: for each language and category, a tenant classifier (`services/trainer/`) is trained on
50, 200, 1,000 and 5,000 messages drawn (seeded, keeping the category's share) from the naturalistic
corpus's training files, and its F1 for that category is measured on the naturalistic test split:
messages by other writers that no training run saw. The encoder's vectors are computed once per text
and shared by the runs (`CachedEncoder`), so the curve costs the heads, not the encoder.

Timing: the `auditmesh classifier train` path end to end (read a JSONL file of `--timing` examples
labelled for all seven categories, encode, fit n-grams, cross-validate, fit, save) on one thread.
Compare numbers only within one run on a quiet machine (`foreign_cpu_share` near 0).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from bench.machine import CpuAccount, code_version
from bench.natural_quality import load_split
from services.common.taxonomy import TEXT_CATEGORIES
from services.trainer.examples import Example
from services.trainer.features import Encoder
from services.trainer.train import TrainConfig, scores_at, train

__all__ = ["CachedEncoder", "SIZES", "curve", "main"]

SIZES = (50, 200, 1000, 5000)
TARGET_SECONDS_25K = 300.0


class CachedEncoder:
    """An encoder that remembers each text's vector (the bench trains many heads on the same texts)."""

    def __init__(self, encoder: Encoder) -> None:
        self.encoder = encoder
        self.cache: dict[str, np.ndarray] = {}

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if t not in self.cache))
        if missing:
            for text, vector in zip(missing, self.encoder.embed(missing)):
                self.cache[text] = vector
        return np.stack([self.cache[t] for t in texts]) if texts else self.encoder.embed([])


def _examples(rows: Sequence[dict[str, Any]], category: str) -> list[Example]:
    return [Example(str(r["text"]), {category: int(category in r["labels"])}) for r in rows]


def curve(lang: str, category: str, encoder: Encoder, sizes: Sequence[int] = SIZES, seed: int = 0) -> dict[str, Any]:
    """F1 (and precision, recall) on the test split of a classifier trained on each size of sample."""
    from services.trainer.features import Featurizer

    pool = load_split(lang, "train") + load_split(lang, "dev")
    test = load_split(lang, "test")
    positive = np.array([category in r["labels"] for r in pool])
    test_positive = np.array([category in r["labels"] for r in test])
    rng = np.random.default_rng(seed)
    points = []
    for size in sizes:
        if size > len(pool):
            break
        share = max(float(positive.mean()), 0.0)
        wanted = min(int(positive.sum()), max(10, round(size * share)))
        chosen = np.concatenate([rng.choice(np.flatnonzero(positive), wanted, replace=False),
                                 rng.choice(np.flatnonzero(~positive), size - wanted, replace=False)])
        trained = train(_examples([pool[i] for i in chosen], category), encoder=encoder,
                        config=TrainConfig(curve=(), seed=seed))
        head = trained.heads[category]
        probability = head.probability(Featurizer(encoder, trained.grams).rows([str(r["text"]) for r in test]))
        scores = scores_at(probability, test_positive, head.threshold)
        points.append({"examples": size, "positives": wanted, "f1": scores.f1, "precision": scores.precision,
                       "recall": scores.recall})
    return {"test_rows": len(test), "test_positives": int(test_positive.sum()), "points": points}


def timing(count: int, encoder: Encoder) -> dict[str, Any]:
    """Seconds to read and train `count` examples through `commands.train_from_file` (fresh encoder cache)."""
    from services.trainer import commands

    base = load_split("zh", "train") + load_split("en", "train") + load_split("zh", "dev") + load_split("en", "dev")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "labels.jsonl"
        with open(path, "w", encoding="utf-8") as handle:
            for i in range(count):  # past the corpus, rows repeat with a suffix: every text distinct, as in an export
                row = base[i % len(base)]
                text = str(row["text"]) if i < len(base) else f"{row['text']} #{i}"
                handle.write(json.dumps({"text": text, "labels": {c: int(c in row["labels"]) for c in TEXT_CATEGORIES}},
                                        ensure_ascii=False) + "\n")
        started = time.perf_counter()
        summary = commands.train_from_file(path, tenant="bench", out=Path(folder) / "out", nice=0)
        seconds = time.perf_counter() - started
    return {"examples": count, "seconds": round(seconds, 1), "target_seconds": TARGET_SECONDS_25K,
            "held_out_f1": {c: m["held_out"]["f1"] for c, m in summary["categories"].items()}}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.tenant_learning", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lang", action="append", choices=("zh", "en"))
    parser.add_argument("--category", action="append", choices=TEXT_CATEGORIES)
    parser.add_argument("--timing", type=int, default=0, help="also time training on this many examples")
    args = parser.parse_args(argv)
    from services.text.multilingual import MultilingualEncoder

    account = CpuAccount.start()
    encoder = CachedEncoder(MultilingualEncoder(threads=1))
    curves: dict[str, Any] = {}
    for lang in args.lang or ("zh", "en"):
        for category in args.category or ("harassment", "hate", "violence", "self_harm", "sexual", "spam"):
            curves[f"{lang}/{category}"] = curve(lang, category, encoder)
            print(f"{lang}/{category}: {[p['f1'] for p in curves[f'{lang}/{category}']['points']]}", file=sys.stderr)
    out: dict[str, Any] = {"command": " ".join(["python -m bench.tenant_learning", *(argv if argv is not None else sys.argv[1:])]),
                           "code": code_version(), "curves": curves}
    if args.timing:
        out["timing"] = timing(args.timing, MultilingualEncoder(threads=1))
    out["foreign_cpu_share"] = account.foreign_cpu_share()
    print(json.dumps(out, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
