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


def test_the_gate_closes_on_benign_chinese_and_their_rules_and_scores_do_not_count(text_model: TextModerationModel) -> None:
    result = text_model.score([*BENIGN, *HARMFUL])
    assert result.zh_closed == [True, True, False, False, False]
    for index in range(len(BENIGN)):
        assert all(h.max_action == "review" and not h.source.startswith("rule:") for h in result.analyses[index].hits)
        assert float(result.scores[index].max()) < 0.5, BENIGN[index]
    for index in range(len(BENIGN), len(BENIGN) + len(HARMFUL)):
        assert result.analyses[index].hits and float(result.scores[index].max()) >= 0.5, HARMFUL[index - len(BENIGN)]


def test_the_semantic_model_keeps_the_gate_closed_for_its_chinese_heads(semantic_model: TextSemanticModel) -> None:
    out = semantic_model.infer(batch(*BENIGN))
    assert all(float(out[name][i, 0]) < 0.5 for name in contract.SCORE_OUTPUTS for i in range(len(BENIGN)))
    assert all(json.loads(out[contract.MATCHES][i, 0]) == [] for i in range(len(BENIGN)))


def test_a_closed_gate_drops_chinese_rules_keeps_english_hits_and_chinese_entries_at_review() -> None:
    # a Chinese phrase rule's hit carries "rule:<id>" as its term (services/common/text_match/lexicon.py)
    rule = LexiconHit("violence", "rule:vio-i-will", 3, 0, 5, "我要宰了它", "rule:vio-i-will")
    entry = LexiconHit("harassment", "废物", 2, 5, 7, "废物", "default")
    slur = LexiconHit("hate", "黑鬼", 3, 8, 10, "黑鬼", "default")
    english = LexiconHit("profanity", "fuck", 2, 11, 15, "fuck", "default")
    threat = LexiconHit("violence", "弄死你", 3, 11, 14, "弄死你", "default")
    kept = gated_hits([rule, entry, slur, english, threat])
    assert [(h.term, h.max_action) for h in kept] == [("废物", "review"), ("黑鬼", "review"), ("fuck", None),
                                                      ("弄死你", "review")]
    hate_rule = LexiconHit("hate", "rule:hate-group-is", 3, 0, 5, "河南人都是", "rule:hate-group-is")
    assert gated_hits([hate_rule]) == ()


def test_the_gate_never_judges_what_it_cannot_read_pinyin_or_an_english_rule_spanning_a_chinese_word() -> None:
    pinyin = LexiconHit("harassment", "你妈死了", 3, 0, 4, "nmsl", "default")            # "nmsl 哈哈"
    english_rule = LexiconHit("violence", "i will 狠狠 kill you", 3, 0, 17, "i will 狠狠 kill you",
                              "rule:threat_first_person")                          # an English context rule
    assert gated_hits([pinyin, english_rule]) == (pinyin, english_rule)


def test_a_severe_entry_after_a_benign_preamble_stays_at_review_and_text_past_the_windows_keeps_the_gate_open(
        text_model: TextModerationModel) -> None:
    preamble = "今天下班回家的路上看到一只小猫蹲在路边，特别可爱，我给它买了根火腿肠，它吃得特别开心。"
    result = text_model.score([preamble * 12 + "你妈死了傻逼", preamble * 30 + "你妈死了傻逼"])
    assert any(hit.term == "你妈死了" and (hit.max_action == "review" or not result.zh_closed[0])
               for hit in result.analyses[0].hits)
    assert result.zh_closed[1] is False  # 30 sentences: more than the gate's windows read
