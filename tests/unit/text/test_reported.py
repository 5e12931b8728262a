"""Reported speech (services/text/reported.py) and what the text model does with a Chinese hit inside a
reported quotation (services/text/model.py `unreported_hits`). Sentences written for this test, not corpus rows."""

from __future__ import annotations

import numpy as np

from services.common.contracts.text import CATEGORIES, LexiconHit
from services.text.model import CORROBORATED, TextModerationModel, unreported_hits
from services.text.reported import MAX_QUOTE_CHARS, in_reported_quotation, reported_quotations

REPORTED = '楼下业主群里有人刷"外地人都滚出去"，物业已经把他踢了'
NO_SCORES = np.zeros(len(CATEGORIES), np.float32)


def quoted(text: str, inner: str) -> tuple[int, int]:
    start = text.index(inner)
    return start - 1, start + len(inner) + 1


def test_a_quotation_after_a_verb_of_saying_or_before_a_demonstrative_is_reported() -> None:
    assert reported_quotations(REPORTED) == [quoted(REPORTED, "外地人都滚出去")]
    after = "“女的就该待在家里”这种话，放在今天谁还听得下去，我们公司一半的工程师是女生"
    assert reported_quotations(after) == [quoted(after, "女的就该待在家里")]
    curly = "他在直播里骂‘死胖子’，我截图举报了，平台两天就封了号"
    assert reported_quotations(curly) == [quoted(curly, "死胖子")]


def test_quotation_marks_alone_are_not_reported_speech() -> None:
    # no reporting cue next to the quotation: an insult in quotes is still said
    assert reported_quotations("今天的饭真难吃，老板你就是个“废物”，下次不来了") == []
    # the message is the quotation, or nearly: fewer than six characters of its own
    assert reported_quotations("我说“你是傻逼”") == []
    assert reported_quotations("“你就是个废物”") == []
    # the writer, or a crowd the writer rallies, saying it; a cue that only begins an everyday word; filler
    # for words of one's own; a quotation used as a label for people
    for said in ("我就说“你是傻逼”，怎么了吧，不服来战", "大家一起刷“外地人都滚出去”，刷屏走起来",
                 "发现“你是傻逼”这件事以后我就不理他了", "他说“傻逼”哈哈哈哈哈哈哈哈", "“死胖子”这种人就该去死吧，看着就烦"):
        assert reported_quotations(said) == [], said
    assert reported_quotations("我妈说“你要是再熬夜就别回家了”，我只好早睡") != []   # the mother says it
    # two marks too far apart are not a pair
    far = "有人说“" + "这" * MAX_QUOTE_CHARS + "”，我不同意他的看法"
    assert reported_quotations(far) == []


def test_a_hit_counts_as_inside_only_when_it_lies_wholly_between_the_marks() -> None:
    spans = reported_quotations(REPORTED)
    start = REPORTED.index("外地人")
    inside = LexiconHit("hate", "rule:hate-exclude", 3, start, start + 7, "外地人都滚出去", "rule:hate-exclude")
    straddling = LexiconHit("hate", "rule:hate-exclude", 3, start - 2, start + 3, '刷"外地人', "rule:hate-exclude")
    assert in_reported_quotation(inside, spans)
    assert not in_reported_quotation(straddling, spans)


def test_a_reported_listed_word_the_heads_do_not_back_stays_at_most_review() -> None:
    text = '他在群里骂我"死胖子"，还骂我"黑鬼"，我已经报警了，大家看到这种人也直接举报吧'
    fat = text.index("死胖子")
    slur = text.index("黑鬼")
    insult = LexiconHit("harassment", "死胖子", 2, fat, fat + 3, "死胖子", "default")
    top_tier = LexiconHit("hate", "黑鬼", 3, slur, slur + 2, "黑鬼", "default")
    own = LexiconHit("harassment", "这种人", 1, text.index("这种人"), text.index("这种人") + 3, "这种人", "default")
    english = LexiconHit("profanity", "fuck", 2, fat, fat + 3, "fuck", "default")   # not the gate's to read
    kept = unreported_hits(text, [insult, top_tier, own, english], NO_SCORES)
    assert [(h.term, h.max_action) for h in kept] == [("死胖子", "review"), ("黑鬼", "review"), ("这种人", None),
                                                      ("fuck", None)]


def test_a_reported_hit_counts_where_the_heads_back_its_category() -> None:
    start = REPORTED.index("外地人")
    hit = LexiconHit("hate", "rule:hate-exclude", 3, start, start + 7, "外地人都滚出去", "rule:hate-exclude")
    backed = NO_SCORES.copy()
    backed[CATEGORIES.index("hate")] = CORROBORATED
    assert unreported_hits(REPORTED, [hit], backed) == (hit,)
    other = NO_SCORES.copy()
    other[CATEGORIES.index("violence")] = 0.99   # another category's score backs nothing
    assert unreported_hits(REPORTED, [hit], other) == ()


def test_the_model_lets_reported_words_only_review_and_keeps_them_said(text_model: TextModerationModel) -> None:
    reported = ["评论区有人骂他“死胖子”，这种人身攻击真的没必要，大家理性讨论",
                "小时候总被同学叫“四眼”“废物”，现在想起来还是挺难受的",
                "我同事总说“你们河南人都是骗子”，我每次都怼回去"]
    said = ["今天的饭真难吃，老板你就是个“废物”，下次不来了", "你这个死胖子", "你们河南人都是骗子"]
    result = text_model.score([*reported, *said])
    for index, text in enumerate(reported):
        assert all(h.max_action == "review" and not h.source.startswith("rule:") for h in result.analyses[index].hits), text
    for index, text in enumerate(said, start=len(reported)):
        assert any(h.max_action is None for h in result.analyses[index].hits), text
