"""The Chinese character n-gram heads (services/text/zh_ngram.py, build: services/text/build/train_zh_ngram.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from services.common.contracts.text import CATEGORIES
from services.common.serving.model_repository import find_model
from services.common.serving.onnx_session import SessionOptions
from services.text.build.train_zh_ngram import THRESHOLDS, choose_threshold
from services.common.text_match.scripts import has_cjk
from services.text.zh_ngram import (TARGETED_CATEGORIES, ZH_HEADS, ZH_TFIDF_MODEL, ZhNgramHeads, targets_someone,
                                    without_untargeted)

BENIGN = ["今天天气真好，我们去公园散步吧", "我明天去医院复查，医生说恢复得不错", "这个菜谱很简单，大家可以试试"]


def test_has_cjk() -> None:
    assert has_cjk("你好") and has_cjk("gg 你好") and not has_cjk("hello 😊")


def test_the_threshold_is_the_lowest_without_a_false_positive() -> None:
    positive = np.array([True, True, False, False])
    assert choose_threshold(np.array([0.99, 0.7, 0.6, 0.1]), positive) == round(float(THRESHOLDS[THRESHOLDS > 0.6][-1]), 3)
    assert choose_threshold(np.array([0.99, 0.7, 0.1, 0.2]), positive) == round(float(THRESHOLDS[-1]), 3)
    assert choose_threshold(np.array([0.9, 0.7, 0.999, 0.1]), positive) is None  # no threshold is clean
    assert choose_threshold(np.array([0.9]), np.array([True])) == round(float(THRESHOLDS[-1]), 3)


def test_heads_score_a_chinese_threat_and_leave_everyday_chinese_low(repository_root: Path) -> None:
    heads = ZhNgramHeads(find_model(ZH_TFIDF_MODEL, root=repository_root), find_model(ZH_HEADS, root=repository_root),
                         SessionOptions(intra_op_threads=1))
    scores = heads.score(["再敢说一句我就弄死你全家", *BENIGN])
    assert scores.shape == (1 + len(BENIGN), len(CATEGORIES))
    assert scores[0, CATEGORIES.index("violence")] >= 0.5
    assert float(scores[1:].max()) < 0.4
    assert heads.score([]).shape == (0, len(CATEGORIES))


def test_a_text_targets_someone_when_it_addresses_the_reader_or_names_a_third_person() -> None:
    assert targets_someone("我知道你住哪") and targets_someone("把他家烧了算了") and targets_someone("早点走吧")
    assert not targets_someone("打死我也不说") and not targets_someone("这个游戏我被打死好几次了")
    assert not targets_someone("我们去爬山山顶风景不错")


def test_violence_and_self_harm_count_only_on_a_targeted_text() -> None:
    scores = np.full((2, len(CATEGORIES)), 0.9, np.float32)
    out = without_untargeted(scores, ["打死我也不说", "我知道你住哪"])
    for category in CATEGORIES:
        column = CATEGORIES.index(category)
        assert out[1, column] == np.float32(0.9)
        assert out[0, column] == (0.0 if category in TARGETED_CATEGORIES else np.float32(0.9)), category
    assert scores[0, 0] == np.float32(0.9)  # the input is not changed
