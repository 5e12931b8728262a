"""Tests for services/text/multilingual.py: windows, the encoder wrapper and the Chinese semantic heads."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from services.common.contracts.text import CATEGORIES
from services.common.serving.model_repository import RepositoryEntry, find_model
from services.common.serving.onnx_session import SessionOptions
from services.text.multilingual import DIMENSION, ENCODER, ZH_CHARS_TFIDF, ZH_SEMANTIC_HEADS, MultilingualEncoder, WindowConfig, \
    ZhSemanticHeads, windows


def test_windows_cut_at_sentence_ends_then_hard_and_stop_at_the_limit() -> None:
    config = WindowConfig(window_chars=10, max_windows=3)
    assert windows("你好。今天天气不错！", config) == ["你好。今天天气不错！"]
    assert windows("第一句话很长很长很长。第二句。", config) == ["第一句话很长很长很长", "。第二句。"]
    assert windows("字" * 100, config) == ["字" * 10] * 3  # at most max_windows, the rest is not read
    assert windows("", config) == [""]
    assert all(len(w) <= 10 for w in windows("。".join(["一二三四五"] * 20), config))


def test_window_config_refuses_nonsense() -> None:
    with pytest.raises(ValueError, match="window_chars"):
        WindowConfig(window_chars=2)
    with pytest.raises(ValueError, match="max_windows"):
        WindowConfig(max_windows=0)


@pytest.fixture(scope="module")
def encoder() -> MultilingualEncoder:
    model = MultilingualEncoder(threads=1)
    model.warm()
    return model


def test_encoder_gives_unit_vectors_and_reads_chinese_by_meaning(encoder: MultilingualEncoder) -> None:
    with pytest.raises(ValueError, match="threads"):
        MultilingualEncoder(threads=0)
    vectors = encoder.embed(["你这个废物，滚出去", "你真是个垃圾，快滚", "今天天气很好，我们去公园"])
    assert vectors.shape == (3, DIMENSION) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    assert float(vectors[0] @ vectors[1]) > float(vectors[0] @ vectors[2])
    assert encoder.embed([]).shape == (0, DIMENSION)


@pytest.fixture(scope="module")
def heads(repository_root: Path, encoder: MultilingualEncoder) -> ZhSemanticHeads:
    return ZhSemanticHeads(find_model(ZH_SEMANTIC_HEADS, root=repository_root),
                           find_model(ZH_CHARS_TFIDF, root=repository_root), SessionOptions(), encoder=encoder)


def test_heads_refuse_a_model_trained_on_another_encoder(repository_root: Path, encoder: MultilingualEncoder) -> None:
    entry = find_model(ZH_SEMANTIC_HEADS, root=repository_root)
    other = RepositoryEntry(entry.name, entry.version, entry.path, entry.sha256, entry.source, entry.license,
                            {**entry.extra, "encoder": "some-other-encoder==1"})
    assert entry.extra["encoder"] == ENCODER
    with pytest.raises(ValueError, match="run `make train`"):
        ZhSemanticHeads(other, find_model(ZH_CHARS_TFIDF, root=repository_root), SessionOptions(), encoder=encoder)


def test_a_harmful_sentence_scores_the_same_alone_and_inside_a_long_benign_post(heads: ZhSemanticHeads) -> None:
    threat = "我知道你住哪，今晚你出门小心点。"
    benign = "周末我们一家去郊外露营，孩子们玩得很开心，晚上还看到了很多星星。" * 3
    alone, buried, calm = heads.score([threat, benign + threat, benign])
    assert alone.shape == (len(CATEGORIES),)
    violence = CATEGORIES.index("violence")
    assert alone[violence] >= 0.5, alone
    assert buried[violence] >= alone[violence] - 1e-6  # max over windows: length does not dilute it
    assert calm.max() < 0.5, calm  # and does not raise a benign post either
