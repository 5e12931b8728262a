"""Tests for services/trainer/train.py: heads learn, thresholds come from cross-validation, the held-out
part is shared and never trained on, runs are reproducible, and too few labels are refused by name."""

from __future__ import annotations

import numpy as np
import pytest

from services.trainer.examples import Example
from services.trainer.train import TrainConfig, TrainingError, best_threshold, holdout_bucket, scores_at, train
from tests.stubs import WordHashEncoder
from tests.unit.trainer.conftest import labelled

CONFIG = TrainConfig(curve=(20, 60), max_terms=2_000)


def test_a_separable_custom_category_is_learned_and_measured_on_texts_it_never_saw(examples: list[Example]) -> None:
    trained = train(examples, encoder=WordHashEncoder(), config=CONFIG)
    head = trained.heads["custom.crypto_scam"]
    held = [e for e in examples if holdout_bucket(e.text) < CONFIG.holdout]
    assert head.held_out.rows == len(held) and head.trained_on == len(examples) - len(held)
    assert head.held_out.f1 >= 0.95 and 0.0 < head.threshold < 1.0
    assert [size for size, _ in head.curve] == [20, 60, head.trained_on]
    assert sorted(trained.heads) == ["custom.crypto_scam", "spam"]


def test_the_same_examples_and_seed_train_the_same_weights(examples: list[Example]) -> None:
    first = train(examples, encoder=WordHashEncoder(), config=CONFIG).heads["spam"]
    second = train(examples, encoder=WordHashEncoder(), config=CONFIG).heads["spam"]
    assert np.array_equal(first.weights, second.weights) and first.threshold == second.threshold


def test_too_few_positives_are_refused_naming_the_category() -> None:
    few = [Example(e.text, {"custom.rare": 0}) for e in labelled(100)] + [Example("rare thing", {"custom.rare": 1})]
    with pytest.raises(TrainingError, match=r"custom\.rare: 1 positive and .* negative examples in the training part"):
        train(few, encoder=WordHashEncoder(), config=CONFIG)


def test_thresholds_and_scores() -> None:
    probability = np.array([0.2, 0.3, 0.7, 0.8])
    positive = np.array([False, True, True, True])
    assert best_threshold(probability, positive) == 0.3  # flags the three positives and no negative: F1 1.0
    scores = scores_at(probability, positive, 0.7)
    assert (scores.precision, scores.recall, scores.rows, scores.positives) == (1.0, round(2 / 3, 4), 4, 3)
    with pytest.raises(ValueError, match="holdout"):
        TrainConfig(holdout=0.9)
