"""The Chinese semantic heads' pure part (services/text/zh_semantic.py): no encoder needed."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from services.common.contracts.text import CATEGORIES
from services.text.zh_semantic import EMBEDDING_DIM, ZhHeads, lexicon_features


def heads(threshold: float = 0.5) -> ZhHeads:
    weights = np.zeros((len(CATEGORIES), EMBEDDING_DIM + len(CATEGORIES)), dtype=np.float32)
    weights[CATEGORIES.index("hate"), 0] = 10.0  # hate follows the first embedding dimension
    return ZhHeads(weights, np.full(len(CATEGORIES), -5.0, dtype=np.float32),
                   np.full(len(CATEGORIES), threshold, dtype=np.float32))


def test_heads_add_categories_to_the_lexicon_and_never_remove_one() -> None:
    embeddings = np.zeros((2, EMBEDDING_DIM), dtype=np.float32)
    embeddings[0, 0] = 1.0
    assert heads().fired(embeddings, [set(), {"spam"}]) == [{"hate"}, {"spam"}]
    assert heads(threshold=1.01).fired(embeddings, [set(), set()]) == [set(), set()]


def test_lexicon_features_follow_the_category_order() -> None:
    features = lexicon_features([{"spam", "hate"}])
    assert features.shape == (1, len(CATEGORIES))
    assert features[0].tolist() == [1.0 if c in ("spam", "hate") else 0.0 for c in CATEGORIES]


def test_heads_round_trip_and_errors_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "zh_heads.json"
    path.write_text(json.dumps(heads().to_json()), encoding="utf-8")
    loaded = ZhHeads.load(path)
    assert np.array_equal(loaded.weights, heads().weights)
    path.write_text(json.dumps({**heads().to_json(), "bias": [0.0]}), encoding="utf-8")
    with pytest.raises(ValueError, match=r"zh_heads\.json"):
        ZhHeads.load(path)
    path.write_text(json.dumps({**heads().to_json(), "format": "other"}), encoding="utf-8")
    with pytest.raises(ValueError, match=r"format"):
        ZhHeads.load(path)
