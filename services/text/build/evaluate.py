"""Quality of a text predictor on functional-corpus rows: a pure function plus a CLI for the text models.

`evaluate_rows(rows, predict)` is what `bench/quality.py` calls: `rows` are corpus rows (dicts with
`text`, `labels`, `functionality`, `hard_negative`), `predict(texts)` returns, per text, the set of
categories that fire. It returns per category precision / recall / F1 (support counts included), the
false-positive rate on hard negatives (a hard negative is a false positive when any category outside
its labels fires), and per functionality the pass rate (a row passes when exactly its labels fire).

The CLI measures the served models in-process on one split (default `test`, which nothing is tuned
on) for the three profiles (fast, balanced, accurate), a category firing at score >= 0.5::

    python -m services.text.build.evaluate --split test

Example::

    >>> rows = [{"text": "a", "labels": ["spam"], "functionality": "f", "hard_negative": False},
    ...         {"text": "b", "labels": [], "functionality": "g", "hard_negative": True}]
    >>> evaluate_rows(rows, lambda texts: [{"spam"}, set()])["categories"]["spam"]["f1"]
    1.0
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from services.common.contracts.text import CATEGORIES

__all__ = ["BALANCED_BAND", "Predict", "evaluate_rows", "profile_predictors"]

#: Maps a batch of texts to the categories that fire for each.
Predict = Callable[[Sequence[str]], Sequence[set[str]]]
#: Balanced profile: texts whose fast scores fall in this band (or that have a target) go to the semantic model.
BALANCED_BAND = (0.15, 0.85)
THRESHOLD = 0.5


def evaluate_rows(rows: Sequence[Mapping[str, Any]], predict: Predict) -> dict[str, Any]:
    """Per category P/R/F1, hard-negative FPR and per functionality pass rates (see the module docstring)."""
    predicted = list(predict([str(r["text"]) for r in rows]))
    if len(predicted) != len(rows):
        raise ValueError(f"predict returned {len(predicted)} results for {len(rows)} rows")
    categories: dict[str, dict[str, float]] = {}
    for category in CATEGORIES:
        truth = [category in r["labels"] for r in rows]
        fired = [category in p for p in predicted]
        tp = sum(t and f for t, f in zip(truth, fired))
        fp = sum(f and not t for t, f in zip(truth, fired))
        fn = sum(t and not f for t, f in zip(truth, fired))
        precision = tp / (tp + fp) if tp + fp else 0.0
        recall = tp / (tp + fn) if tp + fn else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        categories[category] = {"precision": round(precision, 4), "recall": round(recall, 4), "f1": round(f1, 4),
                                "support": tp + fn, "false_positives": fp}
    hard = [(r, p) for r, p in zip(rows, predicted) if r.get("hard_negative")]
    hard_fp = sum(bool(p - set(r["labels"])) for r, p in hard)
    functionalities: dict[str, dict[str, float]] = {}
    for row, fired_set in zip(rows, predicted):
        entry = functionalities.setdefault(str(row["functionality"]), {"rows": 0, "passed": 0})
        entry["rows"] += 1
        entry["passed"] += fired_set == set(row["labels"])
    for entry in functionalities.values():
        entry["pass_rate"] = round(entry["passed"] / entry["rows"], 4)
    return {"rows": len(rows), "categories": categories,
            "macro_f1": round(float(np.mean([c["f1"] for c in categories.values()])), 4),
            "hard_negatives": {"rows": len(hard), "false_positives": hard_fp,
                               "fpr": round(hard_fp / len(hard), 4) if hard else 0.0},
            "functionalities": dict(sorted(functionalities.items()))}


def _fired(outputs: Mapping[str, np.ndarray], index: int, threshold: float = THRESHOLD) -> set[str]:
    from services.common.contracts.text import SCORE_OUTPUTS

    return {category for name, category in SCORE_OUTPUTS.items() if float(outputs[name][index, 0]) >= threshold}


def _uncertain(chunk: Mapping[str, np.ndarray], index: int, names: Sequence[str]) -> bool:
    """Balanced escalates a text with a score inside the band, or a targeted text with any score above its floor."""
    scores = [float(chunk[n][index, 0]) for n in names]
    if any(BALANCED_BAND[0] <= s <= BALANCED_BAND[1] for s in scores):
        return True
    return float(chunk["TARGET"][index, 0]) >= 0.5 and max(scores) >= BALANCED_BAND[0] / 3


def profile_predictors(repository: Path, *, batch: int = 64) -> dict[str, Predict]:
    """fast / balanced / accurate predictors over the served models (score >= 0.5 fires)."""
    from services.common.contracts.text import SCORE_OUTPUTS
    from services.common.serving.onnx_session import SessionOptions
    from services.text.model import TextModerationModel
    from services.text.semantic import TextSemanticModel

    options = SessionOptions(intra_op_threads=2)
    fast_model = TextModerationModel(repository, options)
    semantic_model = TextSemanticModel(repository, options, fast=fast_model)

    def run(model: Any, texts: Sequence[str]) -> list[dict[str, np.ndarray]]:
        return [model.infer({"TEXT": np.array([[t.encode("utf-8")] for t in texts[i:i + batch]], dtype=object)})
                for i in range(0, len(texts), batch)]

    def rows_of(chunks: list[dict[str, np.ndarray]]) -> list[set[str]]:
        return [_fired(chunk, i) for chunk in chunks for i in range(len(chunk["TARGET"]))]

    def fast(texts: Sequence[str]) -> list[set[str]]:
        return rows_of(run(fast_model, texts))

    def accurate(texts: Sequence[str]) -> list[set[str]]:
        return rows_of(run(semantic_model, texts))

    def balanced(texts: Sequence[str]) -> list[set[str]]:
        chunks = run(fast_model, texts)
        flat = [(chunk, i) for chunk in chunks for i in range(len(chunk["TARGET"]))]
        uncertain = [k for k, (chunk, i) in enumerate(flat) if _uncertain(chunk, i, tuple(SCORE_OUTPUTS))]
        out = [_fired(chunk, i) for chunk, i in flat]
        second = rows_of(run(semantic_model, [texts[k] for k in uncertain])) if uncertain else []
        for k, fired in zip(uncertain, second):
            out[k] = fired
        balanced.escalated = len(uncertain) / max(len(texts), 1)  # type: ignore[attr-defined]
        return out

    return {"fast": fast, "balanced": balanced, "accurate": accurate}


def main(argv: Sequence[str] | None = None) -> int:
    from services.text.build.training_data import load_corpus

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repository", type=Path, default=Path("model_repository"))
    parser.add_argument("--split", choices=("train", "dev", "test"), default="test")
    parser.add_argument("--functionalities", action="store_true", help="include per-functionality pass rates")
    args = parser.parse_args(argv)
    rows = [r for r in load_corpus() if r["split"] == args.split and r["lang"] == "en"]
    report: dict[str, Any] = {"split": args.split, "rows": len(rows), "threshold": THRESHOLD, "profiles": {}}
    for name, predict in profile_predictors(args.repository).items():
        result = evaluate_rows(rows, predict)
        if not args.functionalities:
            result.pop("functionalities")
        if name == "balanced":
            result["escalated_fraction"] = round(getattr(predict, "escalated", 0.0), 4)
        report["profiles"][name] = result
    json.dump(report, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
