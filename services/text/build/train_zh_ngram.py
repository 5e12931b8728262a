"""Train and install the Chinese character n-gram heads (`tfidf_zh`, `text_heads_zh`; services/text/zh_ngram.py).

Data: the Chinese functional corpus (services/text/data/corpus/zh.jsonl, project-written, Apache-2.0):
the train split fits, the dev split picks thresholds, the test split is never read here. Texts are
analysed exactly as served (normalised and segmented by the text model's CheapAnalyzer).

* `tfidf_zh/1/`: TF-IDF over character 1- to 3-grams of the normalised text (every non-space
  character is a token, plain counts, min_df 2), fitted on the train split, exported with skl2onnx.
* `text_heads_zh/1/`: per category a logistic regression (C = `C`, fixed, class weights balanced,
  seeded) on the TF-IDF alone. With the lexicon's category indicators as features the heads learned
  to copy the lexicon (it fires on almost every train positive) and added nothing. Threshold: the
  lowest of `THRESHOLDS` (high to low) at which the head fires on no dev row outside its category;
  the bias is shifted so that this threshold scores 0.5. A head that cannot fire without a dev false
  positive is switched off (weights 0, bias -20).

Run by `build_models` after the English heads; alone::

    python -m services.text.build.train_zh_ngram --repository model_repository
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from services.common.contracts.text import CATEGORIES
from services.common.serving.model_repository import RepositoryEntry, install_model
from services.common.serving.onnx_session import SessionOptions
from services.text.build.train_heads import heads_onnx, install_tfidf, text_analyzer
from services.text.heads import TfidfVectorizerModel
from services.text.zh_ngram import ZH_HEADS, ZH_TFIDF_MODEL

__all__ = ["C", "NGRAMS", "THRESHOLDS", "build_zh_ngram_heads", "choose_threshold", "main"]

CORPUS = Path(__file__).resolve().parents[1] / "data" / "corpus" / "zh.jsonl"
C = 4.0
NGRAMS = (1, 3)
#: candidate thresholds, high to low (the same grid as the e5 heads of train_zh_heads.py)
THRESHOLDS = np.linspace(0.995, 0.3, 140)
OFF_BIAS = -20.0
LICENSE = "Apache-2.0 (model); data: zh corpus Apache-2.0 (project-written)"


def choose_threshold(scores: np.ndarray, positive: np.ndarray) -> float | None:
    """The lowest threshold of `THRESHOLDS` (scanned high to low) at which no row with `positive` False
    scores at or above it; None when even the highest has a false positive.

    Example::

        >>> choose_threshold(np.array([0.9, 0.5, 0.2]), np.array([True, False, False]))
        0.505
    """
    negatives = scores[~positive]
    clean = THRESHOLDS[THRESHOLDS > negatives.max()] if negatives.size else THRESHOLDS
    return round(float(clean[-1]), 3) if clean.size else None


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def build_zh_ngram_heads(repository: Path, *, seed: int = 0, corpus: Path = CORPUS) -> list[RepositoryEntry]:
    """Fit and install `tfidf_zh` and `text_heads_zh` (see the module docstring)."""
    import onnx
    from sklearn.linear_model import LogisticRegression

    rows = [r for r in _rows(corpus) if r["split"] in ("train", "dev")]
    analyzer = text_analyzer(repository)
    texts = [a.segmented.text for a in analyzer.analyse_all([str(r["text"]) for r in rows])]
    train = np.array([r["split"] == "train" for r in rows])
    labels = np.array([[c in r["labels"] for c in CATEGORIES] for r in rows])
    tfidf_entry = install_tfidf(repository, [t for t, keep in zip(texts, train) if keep], seed, name=ZH_TFIDF_MODEL,
                                ngram_range=NGRAMS, token_pattern=r"\S", lowercase=False,
                                preprocessing="normalize+segment (CheapAnalyzer)", license=LICENSE)
    x = TfidfVectorizerModel(tfidf_entry, SessionOptions(intra_op_threads=2)).transform(texts)
    weights = np.zeros((x.shape[1], len(CATEGORIES)), np.float32)
    bias = np.full(len(CATEGORIES), OFF_BIAS, np.float32)
    thresholds: dict[str, float | None] = {}
    for k, category in enumerate(CATEGORIES):
        if labels[train, k].all() or not labels[train, k].any():
            thresholds[category] = None
            continue
        head = LogisticRegression(C=C, class_weight="balanced", max_iter=3000, random_state=seed)
        head.fit(x[train], labels[train, k])
        scores = head.predict_proba(x[~train])[:, 1]
        chosen = choose_threshold(scores, labels[~train, k])
        thresholds[category] = chosen
        if chosen is not None:
            weights[:, k] = head.coef_[0]
            bias[k] = float(head.intercept_[0]) - math.log(chosen / (1.0 - chosen))
    print(f"{ZH_HEADS}: thresholds on dev {thresholds}", file=sys.stderr)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.onnx"
        onnx.save(heads_onnx(weights, bias, ZH_HEADS), str(path))
        heads_entry = install_model(repository, ZH_HEADS, "1", path,
                                    source="trained by auditmesh: services/text/build/train_zh_ngram.py",
                                    license=LICENSE,
                                    extra={"categories": list(CATEGORIES), "feature_layout": [ZH_TFIDF_MODEL],
                                           "classifier": f"LogisticRegression(C={C}, class_weight='balanced')",
                                           "dev_thresholds": thresholds, "seed": seed,
                                           "training_rows": int(train.sum()), "dev_rows": int((~train).sum()),
                                           "corpus_source": str(rows[0]["source"]) if rows else ""})
    return [tfidf_entry, heads_entry]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repository", type=Path, default=Path("model_repository"))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    for entry in build_zh_ngram_heads(args.repository, seed=args.seed):
        print(f"{entry.name}/{entry.version}: {entry.sha256[:12]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
