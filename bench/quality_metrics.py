"""Decision-quality metrics over the functional corpus. Pure (numpy only).

* per category: precision / recall / F1 of "the category took REVIEW or BLOCK" against the row's
  labels, each with a 95 % bootstrap interval that resamples TEMPLATES (rows of one template are
  variants of one sentence, so resampling rows would overstate the certainty);
* per functionality: the pass rate (a harmful row passes when every labelled category fires; a row
  passes when no category outside its labels fires, so a benign row passes when nothing fires);
* hard negatives: the false-positive rate (share of hard-negative rows on which a category outside
  the row's labels fires), with its template-bootstrap interval.

Example::

    >>> report = category_report(["a", "b"], [("x",), ()], [("x",), ("x",)], categories=("x",), resamples=0)
    >>> report["x"]["precision"], report["x"]["recall"]
    (0.5, 1.0)
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Sequence

import numpy as np

BOOTSTRAP_SEED = 0
BOOTSTRAP_RESAMPLES = 1000

Labels = Sequence[str]


def _f1(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    with np.errstate(divide="ignore", invalid="ignore"):
        precision = np.where(tp + fp > 0, tp / (tp + fp), 0.0)
        recall = np.where(tp + fn > 0, tp / (tp + fn), 0.0)
        f1 = np.where(precision + recall > 0, 2 * precision * recall / (precision + recall), 0.0)
    return precision, recall, f1


def _template_counts(templates: Sequence[str], resamples: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(row -> template index, resample x template multiplicities)."""
    names = sorted(set(templates))
    index = {name: i for i, name in enumerate(names)}
    rows = np.array([index[t] for t in templates], dtype=np.int64)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(names), size=(resamples, len(names))) if resamples else np.zeros((0, len(names)), np.int64)
    counts = np.zeros((resamples, len(names)), dtype=np.float64)
    for r in range(resamples):
        np.add.at(counts[r], draws[r], 1.0)
    return rows, counts


def _interval(values: np.ndarray) -> list[float] | None:
    if values.size == 0:
        return None
    low, high = np.percentile(values, [2.5, 97.5])
    return [round(float(low), 4), round(float(high), 4)]


def category_report(templates: Sequence[str], labels: Sequence[Labels], fired: Sequence[Labels], *,
                    categories: Sequence[str], resamples: int = BOOTSTRAP_RESAMPLES,
                    seed: int = BOOTSTRAP_SEED) -> dict[str, dict[str, Any]]:
    """Per category: support, precision, recall, F1 and their template-bootstrap 95 % intervals."""
    rows, counts = _template_counts(templates, resamples, seed)
    n_templates = counts.shape[1] if counts.size else len(set(templates))
    report = {}
    for category in categories:
        y = np.array([category in row for row in labels], dtype=np.float64)
        p = np.array([category in row for row in fired], dtype=np.float64)
        per_template = np.zeros((3, n_templates))
        for k, values in enumerate((y * p, (1 - y) * p, y * (1 - p))):
            np.add.at(per_template[k], rows, values)
        precision, recall, f1 = _f1(*(np.array([v.sum()]) for v in per_template))
        entry: dict[str, Any] = {"support": int(y.sum()), "precision": round(float(precision[0]), 4),
                                 "recall": round(float(recall[0]), 4), "f1": round(float(f1[0]), 4)}
        if resamples:
            boot = _f1(*(counts @ per_template[k] for k in range(3)))
            entry.update(precision_ci=_interval(boot[0]), recall_ci=_interval(boot[1]), f1_ci=_interval(boot[2]))
        report[category] = entry
    return report


def row_passes(labels: Labels, fired: Labels) -> bool:
    """Every labelled category fires and none outside the labels does."""
    return set(labels) <= set(fired) and not set(fired) - set(labels)


def functionality_report(functionalities: Sequence[str], labels: Sequence[Labels],
                         fired: Sequence[Labels]) -> dict[str, dict[str, Any]]:
    """Per functionality: rows, pass rate, and the categories that fired wrongly most often."""
    grouped: dict[str, list[tuple[Labels, Labels]]] = defaultdict(list)
    for name, label, fire in zip(functionalities, labels, fired):
        grouped[name].append((label, fire))
    report = {}
    for name in sorted(grouped):
        pairs = grouped[name]
        wrong: dict[str, int] = defaultdict(int)
        missed: dict[str, int] = defaultdict(int)
        for label, fire in pairs:
            for category in set(fire) - set(label):
                wrong[category] += 1
            for category in set(label) - set(fire):
                missed[category] += 1
        report[name] = {"rows": len(pairs), "pass_rate": round(sum(row_passes(l, f) for l, f in pairs) / len(pairs), 4),
                        "missed": dict(sorted(missed.items())), "wrongly_fired": dict(sorted(wrong.items()))}
    return report


def hard_negative_fpr(templates: Sequence[str], labels: Sequence[Labels], fired: Sequence[Labels],
                      hard: Sequence[bool], *, resamples: int = BOOTSTRAP_RESAMPLES,
                      seed: int = BOOTSTRAP_SEED) -> dict[str, Any]:
    """False-positive rate on the hard negatives (a category outside the row's labels fires)."""
    keep = [i for i, h in enumerate(hard) if h]
    if not keep:
        return {"rows": 0, "fpr": None}
    false = np.array([bool(set(fired[i]) - set(labels[i])) for i in keep], dtype=np.float64)
    rows, counts = _template_counts([templates[i] for i in keep], resamples, seed)
    per_template_fp = np.zeros(counts.shape[1] if resamples else len(set(rows.tolist())))
    per_template_n = np.zeros_like(per_template_fp)
    np.add.at(per_template_fp, rows, false)
    np.add.at(per_template_n, rows, 1.0)
    result: dict[str, Any] = {"rows": len(keep), "false_positives": int(false.sum()),
                              "fpr": round(float(false.mean()), 4)}
    if resamples:
        with np.errstate(divide="ignore", invalid="ignore"):
            boot = (counts @ per_template_fp) / np.maximum(counts @ per_template_n, 1.0)
        result["fpr_ci"] = _interval(boot)
    return result
