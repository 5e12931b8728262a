"""Fit a tenant's classifier from its labelled examples: one class-balanced logistic head per category
over shared features (`features.Featurizer`), each head's threshold chosen by cross-validation, and
precision, recall, F1 and a learning curve measured on a held-out fraction the head never saw.

The held-out rows are chosen by a hash of the text (`holdout_bucket`), the same for every category, so
that the n-gram vocabulary is fitted on training texts only and no text trains one head while testing
another. The served heads are exactly the measured ones (fitted on the training part).

Example::

    examples = read_examples(Path("labels.jsonl"))
    trained = train(examples, encoder=MultilingualEncoder(), config=TrainConfig(seed=0))
    trained.heads["custom.crypto_scam"].held_out.f1
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np
from scipy import sparse

from services.trainer.examples import Example
from services.trainer.features import CharNgrams, Encoder, Featurizer, prepared

__all__ = ["Head", "Scores", "TrainConfig", "Trained", "TrainingError", "best_threshold", "holdout_bucket", "scores_at",
           "train"]


class TrainingError(ValueError):
    """Labels that cannot train a head (too few of a class); the message names the category and counts."""


@dataclass(frozen=True)
class TrainConfig:
    """`holdout`: the fraction of texts kept out for the reported metrics; `folds`: cross-validation folds
    for the threshold; `max_terms`: n-gram vocabulary size; `c`: inverse L2 strength; `min_per_class`:
    the fewest positives and negatives a category needs; `curve`: training sizes of the learning curve."""

    holdout: float = 0.2
    folds: int = 5
    max_terms: int = 20_000
    c: float = 4.0
    min_per_class: int = 5
    seed: int = 0
    curve: tuple[int, ...] = (50, 200, 1000, 5000)

    def __post_init__(self) -> None:
        if not 0.05 <= self.holdout <= 0.5:
            raise ValueError(f"holdout: {self.holdout} is outside 0.05..0.5")
        if self.folds < 2:
            raise ValueError(f"folds: {self.folds} is below 2")
        if self.max_terms < 0 or self.c <= 0 or self.min_per_class < 2:
            raise ValueError(f"max_terms {self.max_terms}, c {self.c}, min_per_class {self.min_per_class}: "
                             f"need max_terms >= 0, c > 0, min_per_class >= 2")


@dataclass(frozen=True)
class Scores:
    """Precision, recall and F1 of a head at a threshold, on `rows` texts of which `positives` are positive."""

    precision: float
    recall: float
    f1: float
    rows: int
    positives: int


@dataclass(frozen=True)
class Head:
    """One category's trained head: weights over the featurizer's columns, bias, threshold (chosen by
    cross-validation), its held-out scores at that threshold and its learning curve: training size ->
    held-out F1 of a head fitted on that many examples, at probability 0.5 (the heads are class-balanced,
    so 0.5 is their natural cut), the last point the whole training part."""

    category: str
    weights: np.ndarray
    bias: float
    threshold: float
    held_out: Scores
    trained_on: int
    curve: tuple[tuple[int, float], ...] = ()

    def probability(self, rows: sparse.csr_matrix | np.ndarray) -> np.ndarray:
        """The head's probability per row of features."""
        return _probability(rows, self.weights, self.bias)


@dataclass(frozen=True)
class Trained:
    """A training run's result: the fitted n-grams and a head per category."""

    grams: CharNgrams
    heads: dict[str, Head] = field(default_factory=dict)


def holdout_bucket(text: str) -> float:
    """A stable number in [0, 1) from the prepared text: the same text is held out for every category.

    Example::

        >>> holdout_bucket("hello") == holdout_bucket("HELLO")
        True
    """
    return int(hashlib.sha256(prepared(text).encode("utf-8")).hexdigest()[:8], 16) / 0x100000000


def scores_at(probability: np.ndarray, positive: np.ndarray, threshold: float) -> Scores:
    """`Scores` of flagging every row whose probability is at least `threshold`."""
    flagged = probability >= threshold
    true = int(np.sum(flagged & positive))
    precision = true / int(flagged.sum()) if flagged.any() else 0.0
    recall = true / int(positive.sum()) if positive.any() else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return Scores(round(precision, 4), round(recall, 4), round(f1, 4), int(positive.size), int(positive.sum()))


def best_threshold(probability: np.ndarray, positive: np.ndarray) -> float:
    """The threshold with the highest F1 over the candidate probabilities (ties: the higher threshold).

    Example::

        >>> best_threshold(np.array([0.1, 0.4, 0.6, 0.9]), np.array([False, False, True, True]))
        0.6
    """
    ordered = np.sort(probability)
    ordered_positive = np.sort(probability[positive])
    candidates = np.array(sorted(set(np.round(probability, 6).tolist()), reverse=True))
    # rows at or above each candidate, all and positive (one sort, not one pass per candidate)
    flagged = probability.size - np.searchsorted(ordered, candidates, side="left")
    true = ordered_positive.size - np.searchsorted(ordered_positive, candidates, side="left")
    best, chosen = -1.0, 0.5
    for threshold, count, hit in zip(candidates.tolist(), flagged.tolist(), true.tolist()):
        precision = hit / count if count else 0.0
        recall = hit / ordered_positive.size if ordered_positive.size else 0.0
        f1 = round(2 * precision * recall / (precision + recall) if precision + recall else 0.0, 4)
        if f1 > best:
            best, chosen = f1, float(threshold)
    return chosen


def _probability(rows: sparse.csr_matrix | np.ndarray, weights: np.ndarray, bias: float) -> np.ndarray:
    logits = np.asarray(rows @ weights, dtype=np.float64).reshape(-1) + bias
    return np.asarray(1.0 / (1.0 + np.exp(-logits)))


def _fit(rows: sparse.csr_matrix, positive: np.ndarray, config: TrainConfig) -> tuple[np.ndarray, float]:
    from sklearn.linear_model import LogisticRegression

    model = LogisticRegression(C=config.c, class_weight="balanced", solver="liblinear", random_state=config.seed,
                               max_iter=1000)
    model.fit(rows, positive.astype(np.int32))
    return np.asarray(model.coef_[0], dtype=np.float32), float(model.intercept_[0])


def _stratified_folds(positive: np.ndarray, folds: int, rng: np.random.Generator) -> np.ndarray:
    """A fold number per row, each class dealt round-robin over the folds in a seeded order."""
    fold = np.zeros(positive.size, dtype=np.int64)
    for value in (True, False):
        members = rng.permutation(np.flatnonzero(positive == value))
        fold[members] = np.arange(members.size) % folds
    return fold


def _head(category: str, rows: sparse.csr_matrix, positive: np.ndarray, held: sparse.csr_matrix,
          held_positive: np.ndarray, config: TrainConfig) -> Head:
    rng = np.random.default_rng(config.seed)
    folds = min(config.folds, int(positive.sum()), int((~positive).sum()))
    fold = _stratified_folds(positive, folds, rng)
    out_of_fold = np.zeros(positive.size)
    for k in range(folds):
        weights, bias = _fit(rows[fold != k], positive[fold != k], config)
        out_of_fold[fold == k] = _probability(rows[fold == k], weights, bias)
    threshold = best_threshold(out_of_fold, positive)
    weights, bias = _fit(rows, positive, config)
    curve = []
    for size in config.curve:
        if size >= positive.size:
            break
        sample = _stratified_sample(positive, size, rng)
        if positive[sample].all() or not positive[sample].any():
            continue
        w, b = _fit(rows[sample], positive[sample], config)
        curve.append((size, scores_at(_probability(held, w, b), held_positive, 0.5).f1))
    held_probability = _probability(held, weights, bias)
    curve.append((int(positive.size), scores_at(held_probability, held_positive, 0.5).f1))
    return Head(category, weights, bias, threshold, scores_at(held_probability, held_positive, threshold),
                int(positive.size), tuple(curve))


def _stratified_sample(positive: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """`size` row indexes keeping the share of positives (at least one of each class when both exist)."""
    share = float(positive.mean())
    wanted = min(max(1, round(size * share)), int(positive.sum()))
    chosen = np.concatenate([rng.choice(np.flatnonzero(positive), wanted, replace=False),
                             rng.choice(np.flatnonzero(~positive), min(size - wanted, int((~positive).sum())),
                                        replace=False)])
    return np.sort(chosen)


def train(examples: Sequence[Example], *, encoder: Encoder, config: TrainConfig = TrainConfig(),
          progress: Callable[[str], None] = lambda message: None) -> Trained:
    """A head for every category some example labels (see the module docstring).

    Raises TrainingError naming a category with fewer than `config.min_per_class` positives or negatives
    in the training part or none in the held-out part."""
    texts = [e.text for e in examples]
    held = np.array([holdout_bucket(t) < config.holdout for t in texts], dtype=bool)
    categories = sorted({name for e in examples for name in e.labels})
    for category in categories:
        for part, name in ((~held, "training"), (held, "held-out")):
            values = [e.labels[category] for e, h in zip(examples, part) if h and category in e.labels]
            positives, negatives = sum(values), len(values) - sum(values)
            needed = config.min_per_class if name == "training" else 1
            if positives < needed or negatives < needed:
                raise TrainingError(f"{category}: {positives} positive and {negatives} negative examples in the "
                                    f"{name} part; need at least {needed} of each (label more examples)")
    progress(f"fitting character n-grams on {int((~held).sum())} training texts")
    grams = CharNgrams.fit([prepared(t) for t, h in zip(texts, held) if not h], max_terms=config.max_terms)
    featurizer = Featurizer(encoder, grams)
    progress(f"encoding {len(texts)} texts")
    rows = featurizer.rows(texts)
    heads: dict[str, Head] = {}
    for category in categories:
        labelled = np.array([category in e.labels for e in examples], dtype=bool)
        positive = np.array([e.labels.get(category, 0) == 1 for e in examples], dtype=bool)
        train_rows, held_rows = np.flatnonzero(labelled & ~held), np.flatnonzero(labelled & held)
        progress(f"training {category} on {train_rows.size} texts, {held_rows.size} held out")
        heads[category] = _head(category, rows[train_rows], positive[train_rows], rows[held_rows], positive[held_rows],
                                config)
    return Trained(grams, heads)
