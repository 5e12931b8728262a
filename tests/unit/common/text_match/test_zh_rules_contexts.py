"""Chinese phrase rules, context rules, the clause view and the variant (emoji / split / word) space.

Every context rule in data/zh_context_rules.json carries [suppressed, kept] examples; each is checked
here both ways: the suppressed one is a hit WITHOUT context rules and no hit with THIS context rule
alone, so a context entry that does nothing fails its test.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import pytest

from services.common.text_match.lexicon import DEFAULT_LEXICON_PATH, Lexicon
from services.common.text_match.normalize import normalize
from services.common.text_match.zh_clauses import clause_normalize
from services.common.text_match.zh_context import (addressed, load_contexts, load_ordinary_phrases, parse_addressees,
                                                   parse_contexts, parse_ordinary_phrases, quoted_spans)
from services.common.text_match.zh_rules import load_rules, parse_rules
from services.common.text_match.zh_variants import variant_view
from tests.stubs import default_lexicon


def lexicon() -> Lexicon:
    return default_lexicon()


@lru_cache(maxsize=1)
def lexicon_without_contexts() -> Lexicon:
    return lexicon().with_contexts(())


def lexicon_with(context: object) -> Lexicon:
    from services.common.text_match.zh_context import ContextRule
    assert isinstance(context, ContextRule)
    return lexicon().with_contexts((context,))


def categories(text: str, lex: Lexicon | None = None) -> set[str]:
    return {m.category for m in (lex or lexicon()).find(normalize(text))}


CONTEXTS = load_contexts()


@pytest.mark.parametrize("context", CONTEXTS, ids=[c.id for c in CONTEXTS])
def test_each_context_rule_suppresses_its_example_and_keeps_the_harmful_one(context: object) -> None:
    from services.common.text_match.zh_context import ContextRule
    assert isinstance(context, ContextRule) and context.examples
    for suppressed, kept in context.examples:
        assert categories(suppressed, lexicon_without_contexts()) & context.suppresses, suppressed
        assert not categories(suppressed, lexicon_with(context)) & context.suppresses, suppressed
        assert not categories(suppressed) & context.suppresses, suppressed
        assert categories(kept) & context.suppresses, kept


@pytest.mark.parametrize(("text", "category"), [
    ("我知道你住哪", "violence"), ("楼上出门小心点", "violence"), ("信不信我废了你", "violence"),
    ("你怎么还不去死", "self_harm"), ("楼顶风景不错，你上去看看？", "self_harm"),
    ("东北人都是骗子", "hate"), ("防火防盗防广西人", "hate"), ("禁止印度人入内", "hate"),
    ("你是猪吗，这都不会", "harassment"), ("你脑子进水了吧", "harassment"),
    ("想和你上床", "sexual"), ("刷单日赚三百，私信我", "spam"), ("您的银行账户异常，请点击hxxp://a-b.top处理", "spam"),
])
def test_phrase_rules_fire_on_frames_without_listed_words(text: str, category: str) -> None:
    assert category in categories(text), text


@pytest.mark.parametrize("text", [
    "我知道你喜欢吃什么", "明天出门记得带伞", "这只猪长得真肥", "河南人真热情", "你是鸡年出生的吗",
    "网络兼职刷单是诈骗，千万别信", "今天累死了", "困死了，先睡了", "把鱼杀好洗净，切段",
])
def test_phrase_rules_leave_benign_lookalikes_alone(text: str) -> None:
    assert categories(text) == set(), (text, lexicon().find(normalize(text)))


def test_needs_target_rule_needs_someone_addressed() -> None:
    assert "harassment" in categories("楼主脑子进水了吧")
    assert "harassment" not in categories("手机进水了，脑子都乱了")


@pytest.mark.parametrize(("text", "expected"), [
    ("菜就多练，别在这丢人现眼", True), ("活着也是拖累家人，早点走吧", True), ("赶紧滚出去", True),
    ("妹妹多大了，发张照片", True), ("兄弟们冲啊", False), ("我妹妹多大了", False), ("这部电影真垃圾", False),
    ("今天早点睡吧", False),
])
def test_an_imperative_or_an_opening_vocative_addresses_the_reader(text: str, expected: bool) -> None:
    assert addressed(normalize(text).text) is expected, text


def test_needs_target_rules_fire_on_an_implied_addressee() -> None:
    assert "harassment" in categories("菜就多练，别在这丢人现眼")
    assert "self_harm" in categories("活着也是拖累家人，早点走吧")
    assert not categories("我活着也是拖累家人")  # no one addressed: a feeling, not incitement


def test_addressee_file_errors_name_the_file_and_key() -> None:
    with pytest.raises(ValueError, match=r"a\.json: implied\[1\]: invalid pattern"):
        parse_addressees({"addressees": ["你"], "implied": ["^兄弟", "(别"]}, "a.json")
    with pytest.raises(ValueError, match=r"a\.json: implied: must be a list"):
        parse_addressees({"addressees": ["你"], "implied": "别"}, "a.json")
    with pytest.raises(ValueError, match=r"addressees: a\.json must hold"):
        parse_addressees({"addressees": []}, "a.json")


def test_clause_view_keeps_clause_punctuation_and_offsets() -> None:
    view = clause_normalize("操，又掉 线了")
    assert view.text == "操，又掉线了" and view.original_text(2, 6) == "又掉 线了"
    assert "profanity" in categories("操，又掉线了") and categories("操场上有人") == set()


@pytest.mark.parametrize(("text", "category", "surface"), [
    ("扌喿你女马，楼主", "harassment", "扌喿你女马"),          # recomposed split characters
    ("楼上真是个🐕‍🦺东西", "harassment", "🐕\u200d🦺东西"),   # emoji with a zero-width joiner
    ("艹你🐎，三楼", "profanity", "艹你🐎"),
    ("你 是 s b", "harassment", "s b"),                      # spaced initials
    ("主播4了算了", "self_harm", "4了算了"),                   # digit standing for a character
])
def test_variant_space_positive(text: str, category: str, surface: str) -> None:
    hits = [m for m in lexicon().find(normalize(text)) if m.category == category]
    assert any(m.matched_text == surface for m in hits), hits


@pytest.mark.parametrize("text", ["骑🐎去草原", "我4点到", "木子李是个姓", "他姓弓长张"])
def test_variant_space_benign(text: str) -> None:
    assert categories(text) == set()


def test_variant_view_is_none_when_nothing_changes_and_maps_spans_back() -> None:
    assert variant_view(normalize("今天天气不错")) is None
    view = variant_view(normalize("他女马的"))
    assert view is not None and view.text == "他妈的" and view.original_span(1, 2) == (1, 3)


def test_max_action_is_carried_into_the_match_json() -> None:
    hits = [m for m in lexicon().find(normalize("你今晚睡了吗")) if m.term == "睡了"]
    assert hits and hits[0].max_action == "review" and hits[0].to_json()["max_action"] == "review"


def test_quoted_spans() -> None:
    assert quoted_spans("他说“滚”和「走」") == [(3, 4), (7, 8)]


def test_rules_file_errors_name_the_file_and_key(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"x\.json: rules\[0\] \(r1\): pattern: unknown slot \{NOPE\}"):
        parse_rules({"slots": {}, "rules": [{"id": "r1", "category": "hate", "pattern": "{NOPE}"}]}, "x.json")
    with pytest.raises(ValueError, match=r"category"):
        parse_rules({"slots": {}, "rules": [{"id": "r1", "category": "rude", "pattern": "a"}]}, "x.json")
    with pytest.raises(ValueError, match=r"contexts\[0\] \(c1\): kind"):
        parse_contexts({"contexts": [{"id": "c1", "kind": "odd", "suppresses": ["hate"], "text": "a"}]}, "y.json")


def test_ordinary_phrases_come_from_the_context_data_and_drop_homophone_hits() -> None:
    assert {"你妈", "您妈", "我口"} <= load_ordinary_phrases()
    without = Lexicon.build(lexicon().entries, contact_rule=True, rules=load_rules(), contexts=CONTEXTS)
    # 你妈 reads as 尼玛: family talk is a pinyin hit only without the ordinary phrases
    assert "profanity" in categories("你妈知道吗", without)
    assert "profanity" not in categories("你妈知道吗")
    # the abusive uses are entries of their own and still match
    assert {"harassment", "profanity"} <= categories("你妈的")
    assert lexicon().version != without.version  # the phrases are part of what the lexicon matches


def test_ordinary_phrases_errors_name_the_file_and_key() -> None:
    with pytest.raises(ValueError, match=r"y\.json: ordinary_phrases\[1\]: must be a phrase of two or more Han"):
        parse_ordinary_phrases({"ordinary_phrases": ["你妈", "x"]}, "y.json")
    with pytest.raises(ValueError, match=r"y\.json: ordinary_phrases: must be a list"):
        parse_ordinary_phrases({"ordinary_phrases": "你妈"}, "y.json")
    with pytest.raises(ValueError, match=r"y\.json: ordinary_phrases\[0\]"):  # validated with the context rules
        parse_contexts({"ordinary_phrases": ["妈"], "contexts": []}, "y.json")
    assert parse_ordinary_phrases({"contexts": []}) == frozenset()


def test_shipped_data_files_load() -> None:
    assert len(load_rules()) > 40 and len(CONTEXTS) > 10
    document = json.loads((DEFAULT_LEXICON_PATH.parent / "zh_recompose.json").read_text(encoding="utf-8"))
    assert document["pairs"]["女马"] == "妈" and "CC BY 3.0" in document["licence"]


# Which categories the default lexicon gives texts where a second category used to ride along:
# group hate is hate (not harassment), a threat against someone's family is violence, swearing at a
# thing is profanity (not harassment), a first-person self-statement is no harassment, and 你是不是不想活了
# is a threat, not self-harm talk.
@pytest.mark.parametrize(("text", "present", "absent"), [
    ("又是山东人干的吧，这帮人没救了", "hate", "harassment"),
    ("打死你全家", "violence", "harassment"),
    ("去你妈的破天气", "profanity", "harassment"),
    ("去你大爷的，又停电", "profanity", "harassment"),
    ("这鸡巴天气真冷", "profanity", "sexual"),
    ("你是不是不想活了", "violence", "self_harm"),
    ("我这种垃圾不配活着", None, "harassment"),
])
def test_category_of_text(text: str, present: str | None, absent: str) -> None:
    found = categories(text)
    assert present is None or present in found, (text, found)
    assert absent not in found, (text, found)


@pytest.mark.parametrize("text", ["去你妈的，楼主", "操你妈的破主播", "楼主，你们这帮人没救了", "你全家都是废物"])
def test_the_same_words_aimed_at_a_person_stay_harassment(text: str) -> None:
    assert "harassment" in categories(text), text
