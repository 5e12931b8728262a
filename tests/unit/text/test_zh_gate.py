"""The Chinese harm gate (text_heads_zh_gate): where it judges a Chinese message harmless, the Chinese heads'
scores and the Chinese lexicon and rule hits of that message do not count; harmful messages keep theirs."""

from __future__ import annotations

import json

import numpy as np

from services.common.contracts import text as contract
from services.common.contracts.text import LexiconHit
from services.text.model import TextModerationModel, gated_hits
from services.text.semantic import TextSemanticModel

#: Written for this test (not corpus rows): an idiom about a pet, and counter-speech quoting a regional slur.
BENIGN = ["我家那只猫今天又把花盆打翻了，我要宰了它（开玩笑的）",
          "有人说“河南人都是骗子”，我是河南人，我身边没有一个骗子，这种地域黑真的够了"]
HARMFUL = ["你这种垃圾怎么还不去死，全家都是废物", "我知道你住哪，今晚等着，我会让你后悔", "黑鬼滚出中国"]


def batch(*texts: str) -> dict[str, np.ndarray]:
    return {"TEXT": np.array([[t.encode("utf-8")] for t in texts], dtype=object)}


def test_the_gate_closes_on_benign_chinese_and_their_hits_and_scores_do_not_count(text_model: TextModerationModel) -> None:
    result = text_model.score([*BENIGN, *HARMFUL])
    assert result.zh_closed == [True, True, False, False, False]
    for index in range(len(BENIGN)):
        assert result.analyses[index].hits == () and float(result.scores[index].max()) < 0.5, BENIGN[index]
    for index in range(len(BENIGN), len(BENIGN) + len(HARMFUL)):
        assert result.analyses[index].hits and float(result.scores[index].max()) >= 0.5, HARMFUL[index - len(BENIGN)]


def test_the_semantic_model_keeps_the_gate_closed_for_its_chinese_heads(semantic_model: TextSemanticModel) -> None:
    out = semantic_model.infer(batch(*BENIGN))
    assert all(float(out[name][i, 0]) < 0.5 for name in contract.SCORE_OUTPUTS for i in range(len(BENIGN)))
    assert all(json.loads(out[contract.MATCHES][i, 0]) == [] for i in range(len(BENIGN)))


def test_a_closed_gate_drops_chinese_rules_and_entries_keeps_english_hits_and_top_tier_slurs_at_review() -> None:
    rule = LexiconHit("violence", "宰了 它", 3, 0, 4, "我要宰了它", "rule:vio-i-will")
    entry = LexiconHit("harassment", "废物", 2, 5, 7, "废物", "default")
    slur = LexiconHit("hate", "黑鬼", 3, 8, 10, "黑鬼", "default")
    english = LexiconHit("profanity", "fuck", 2, 11, 15, "fuck", "default")
    kept = gated_hits([rule, entry, slur, english])
    assert [(h.term, h.max_action) for h in kept] == [("黑鬼", "review"), ("fuck", None)]
    hate_rule = LexiconHit("hate", "河南人 都是", 3, 0, 5, "河南人都是", "rule:hate-group-is")
    assert gated_hits([hate_rule]) == ()
