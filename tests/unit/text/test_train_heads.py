"""Tests for services/text/build/train_heads.py and evaluate.py: determinism, calibration, the ONNX heads."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnxruntime as ort

from services.text.build.evaluate import evaluate_rows
from services.text.build.train_heads import fit_head, heads_onnx


def _data(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(300, 6))
    y = (x[:, 0] + 0.5 * x[:, 1] + rng.normal(scale=0.5, size=300) > 0.3).astype(np.int64)
    return x, y


def test_same_seed_gives_the_same_head() -> None:
    x, y = _data(1)
    xd, yd = _data(2)
    w = np.ones(len(y))
    first = fit_head(x, y, w, xd, yd, seed=0)
    second = fit_head(x, y, w, xd, yd, seed=0)
    assert np.array_equal(first.weights, second.weights) and first.bias == second.bias
    assert (first.c, first.platt, first.dev_threshold) == (second.c, second.platt, second.dev_threshold)


def test_half_is_the_dev_operating_point() -> None:
    x, y = _data(3)
    xd, yd = _data(4)
    head = fit_head(x, y, np.ones(len(y)), xd, yd, seed=0)
    scores = 1 / (1 + np.exp(-(xd @ head.weights + head.bias)))
    predicted = scores >= 0.5
    f1 = 2 * np.sum(predicted & (yd == 1)) / (predicted.sum() + yd.sum())
    assert abs(f1 - head.dev_f1) < 1e-6 and head.dev_f1 > 0.8


def test_heads_onnx_computes_sigmoid_of_the_linear_map() -> None:
    weights = np.arange(21, dtype=np.float32).reshape(3, 7) / 10
    bias = np.linspace(-1, 1, 7).astype(np.float32)
    session = ort.InferenceSession(heads_onnx(weights, bias, "t").SerializeToString())
    x = np.array([[0.1, -0.2, 0.3], [1, 0, 0]], np.float32)
    expected = 1 / (1 + np.exp(-(x @ weights + bias)))
    assert np.allclose(session.run(None, {"X": x})[0], expected, atol=1e-6)
    assert heads_onnx(weights, bias, "t").SerializeToString() == heads_onnx(weights, bias, "t").SerializeToString()


def test_evaluate_rows_counts_hard_negative_false_positives_and_functionalities() -> None:
    rows = [{"text": "a", "labels": ["violence"], "functionality": "threat", "hard_negative": False},
            {"text": "b", "labels": [], "functionality": "kill_object", "hard_negative": True},
            {"text": "c", "labels": ["profanity"], "functionality": "benign_swear", "hard_negative": True}]
    fired = {"a": {"violence"}, "b": {"violence"}, "c": {"profanity"}}
    report = evaluate_rows(rows, lambda texts: [fired[t] for t in texts])
    assert report["categories"]["violence"] == {"precision": 0.5, "recall": 1.0, "f1": 0.6667, "support": 1,
                                                "false_positives": 1}
    assert report["hard_negatives"] == {"rows": 2, "false_positives": 1, "fpr": 0.5}
    assert report["functionalities"]["kill_object"]["pass_rate"] == 0.0
    assert report["functionalities"]["benign_swear"]["pass_rate"] == 1.0


def test_placeholder_tokens_are_the_words_of_the_name_group_and_identity_fillers() -> None:
    from services.text.build.train_heads import placeholder_tokens

    tokens = placeholder_tokens()
    assert {"alex", "priya", "sam", "muslims", "people", "gay", "lesbian", "immigrant"} <= tokens
    assert all(token == token.lower() and " " not in token for token in tokens)
    assert not tokens & {"a", "an", "you", "idiot", "vermin", "deserve"}


def test_install_tfidf_drops_every_term_with_an_excluded_token(tmp_path: Path) -> None:
    from services.common.serving.onnx_session import SessionOptions
    from services.text.build.train_heads import install_tfidf
    from services.text.heads import TfidfVectorizerModel

    texts = ["thanks sam for the review", "sam is a clown", "thanks for the review", "you are a clown",
             "a review for sam", "thanks sam"] * 2
    entry = install_tfidf(tmp_path, texts, 0, name="tfidf_toy", ngram_range=(1, 2), token_pattern=None,
                          lowercase=True, preprocessing="none", license="test", excluded_tokens=frozenset({"sam"}))
    vocabulary = json.loads((entry.path.parent / "vocabulary.json").read_text(encoding="utf-8"))
    assert vocabulary and not [term for term in vocabulary if "sam" in term.split(" ")]
    assert {"clown", "thanks", "the review"} <= set(vocabulary)
    vectors = TfidfVectorizerModel(entry, SessionOptions()).transform(["sam sam sam", "thanks sam"])
    assert not vectors[0].any() and vectors[1].any()  # a name alone is no signal; the other words still are
