"""Chinese matching spaces and context (issue 14): each with a positive and a benign case."""

from __future__ import annotations

import pytest

from services.common.text_match.lexicon import Lexicon, LexiconEntry
from services.common.text_match.normalize import normalize
from services.common.text_match.zh_contact import contact_spans
from services.common.text_match.zh_context import addressed
from services.common.text_match.zh_pinyin import find_pinyin, readings, term_syllables
from services.common.text_match.zh_segment import cuts_word, word_spans
from tests.stubs import default_lexicon


def _hits(lexicon: Lexicon, text: str) -> list[tuple[str, str]]:
    return [(m.category, m.matched_text) for m in lexicon.find(normalize(text))]


def test_chars_space_keeps_a_whole_word_hit_and_drops_a_straddle() -> None:
    lexicon = Lexicon.build([LexiconEntry("机巴", "sexual", 2, "t"), LexiconEntry("操你", "profanity", 2, "t")])
    assert _hits(lexicon, "手机巴士这个网站还能上吗") == []
    assert _hits(lexicon, "广播体操你练了吗") == []
    assert _hits(lexicon, "操你，滚") == [("profanity", "操你")]


def test_unambiguous_entry_survives_a_straddle() -> None:
    entry = LexiconEntry("日批", "sexual", 3, "t", unambiguous=True)
    assert _hits(Lexicon.build([entry]), "今日批改作业") == [("sexual", "日批")]
    assert _hits(Lexicon.build([LexiconEntry("日批", "sexual", 3, "t")]), "今日批改作业") == []


def test_segmentation_runs_after_normalisation() -> None:
    lexicon = Lexicon.build([LexiconEntry("傻逼", "profanity", 2, "t")])
    assert _hits(lexicon, "你个傻　.　逼") == [("profanity", "傻　.　逼")]


def test_cuts_word() -> None:
    assert cuts_word(word_spans("手机巴士"), 1, 3)
    assert not cuts_word(word_spans("你个傻逼"), 2, 4)


def test_pinyin_space_homophone_and_latin_syllables() -> None:
    lexicon = Lexicon.build([LexiconEntry("傻逼", "profanity", 2, "t", spaces=("chars", "pinyin"))])
    assert _hits(lexicon, "你这么个沙币") == [("profanity", "沙币")]
    assert _hits(lexicon, "楼主sha逼吧") == [("profanity", "sha逼")]
    assert _hits(lexicon, "沙滩上捡贝壳") == []


def test_a_sound_alike_cut_out_of_other_words_or_across_a_sentence_is_no_evasion() -> None:
    lexicon = Lexicon.build([LexiconEntry("贱人", "harassment", 3, "t", spaces=("chars", "pinyin"), unambiguous=True),
                             LexiconEntry("日赚", "spam", 2, "t", spaces=("chars", "pinyin"), unambiguous=True),
                             LexiconEntry("卧槽", "profanity", 2, "t", spaces=("chars", "pinyin"))])
    assert _hits(lexicon, "福建人都很会做生意") == []          # 建人 cuts 福建: not 贱人
    assert _hits(lexicon, "今天是纪念日。转一段话给大家") == []  # 日。转 is two sentences: not 日赚
    assert _hits(lexicon, "你个见人") == [("harassment", "见人")]  # a sound-alike standing alone still is
    assert _hits(lexicon, "每天日转三千") == [("spam", "日转")]
    assert _hits(lexicon, "卧。槽，又掉线了") == [("profanity", "卧。槽")]  # the word itself, any mark inside


def test_one_syllable_and_a_particle_or_a_question_is_ordinary_speech() -> None:
    lexicon = Lexicon.build([LexiconEntry("妈的", "profanity", 2, "t", spaces=("chars", "pinyin")),
                             LexiconEntry("尼玛", "profanity", 2, "t", spaces=("chars", "pinyin")),
                             LexiconEntry("傻逼", "profanity", 2, "t", spaces=("chars", "pinyin"))])
    assert _hits(lexicon, "你们骂的每一句她都看得到") == []   # 骂的 is not 妈的
    assert _hits(lexicon, "刚那个语音是你吗") == []           # 你吗 is not 尼玛
    assert _hits(lexicon, "妈的，又堵车") == [("profanity", "妈的")]  # the word itself
    assert _hits(lexicon, "泥马又堵车") == [("profanity", "泥马")]    # two syllables, no particle: an evasion
    assert _hits(lexicon, "你这个沙币") == [("profanity", "沙币")]


def test_pinyin_space_needs_the_entry_flag() -> None:
    assert _hits(Lexicon.build([LexiconEntry("傻逼", "profanity", 2, "t")]), "你这么个沙币") == []


def test_initials_space_only_for_flagged_entries() -> None:
    flagged = Lexicon.build([LexiconEntry("你妈死了", "harassment", 3, "t", spaces=("chars", "pinyin", "initials"))])
    plain = Lexicon.build([LexiconEntry("你妈死了", "harassment", 3, "t", spaces=("chars", "pinyin"))])
    assert _hits(flagged, "nmsl") == [("harassment", "nmsl")]
    assert _hits(plain, "nmsl") == []
    assert _hits(flagged, "nmslx is a file") == []  # Latin edge must not touch another letter


@pytest.mark.parametrize(("text", "category", "surface"), [
    ("cnmlgb", "harassment", "cnmlgb"),  # 操你妈了个逼 holds 你: its own target
    ("楼主nmlgb", "harassment", "nmlgb"),
    ("你个sqj", "harassment", "sqj"),  # 死全家, aimed at someone
    ("主播qjsg", "harassment", "qjsg"),
    ("这什么smjb玩意", "profanity", "smjb"),
])
def test_default_lexicon_curse_initials(text: str, category: str, surface: str) -> None:
    assert (category, surface) in _hits(default_lexicon(), text)


@pytest.mark.parametrize("text", ["sqj", "今天去了一趟sm超市", "cnmlgbx.tar.gz"])
def test_default_lexicon_curse_initials_benign(text: str) -> None:
    # 死全家 needs someone addressed; an initials run must be a whole Latin token
    assert not {c for c, _ in _hits(default_lexicon(), text)} & {"harassment", "profanity"}


def test_find_pinyin_respects_latin_boundaries() -> None:
    assert find_pinyin("chaos", term_syllables("操"), initials=False) == []
    assert find_pinyin("cao你妈", term_syllables("操你妈"), initials=False) == [(0, 5)]


def test_needs_target_context() -> None:
    lexicon = Lexicon.build([LexiconEntry("垃圾", "harassment", 2, "t", needs_target=True)])
    assert _hits(lexicon, "你就是个垃圾") == [("harassment", "垃圾")]
    assert _hits(lexicon, "这部电影真垃圾，浪费钱") == []
    assert addressed("楼上就是个废物") and not addressed("这破天气")


@pytest.mark.parametrize("text", ["加薇信 ab8866123", "详情q：幺三九零八八六六五二一", "裸聊扣 7-3-6-1-2-8-8-8-1",
                                  "v信 ①⑧⑧⑥⑥②③", "电话 139/0886/6521"])
def test_contact_rule_positive(text: str) -> None:
    assert contact_spans(text)


@pytest.mark.parametrize("text", ["您的验证码是482913，五分钟内有效", "订单号２０２４０６１１０００１２３已发货",
                                  "我在微信上跟妈妈聊天", "Q3 results are in", "Q4 2025 earnings call at 5",
                                  "your booking reference is XK7Q2P. Check-in opens 24h before departure.",
                                  "Call us at 800-555-0199", "see the faq 2 items down", "加q 12 个人"])
def test_contact_rule_benign(text: str) -> None:
    assert contact_spans(text) == []


@pytest.mark.parametrize("text, contact", [("加q 8866 1234", "q 8866 1234"), ("加vx abc12345", "vx abc12345"),
                                           ("call ①③⑨⑧⑧⑥⑥⑤②①", "①③⑨⑧⑧⑥⑥⑤②①")])
def test_contact_rule_stops_at_the_account(text: str, contact: str) -> None:
    assert [text[s:e] for s, e in contact_spans(text)] == [contact]


def test_common_english_words_are_not_pinyin() -> None:
    lexicon = Lexicon.build([LexiconEntry("妈的", "profanity", 2, "t", spaces=("chars", "pinyin")),
                             LexiconEntry("他妈的", "profanity", 2, "t", spaces=("chars", "pinyin"))])
    assert _hits(lexicon, "I made a cake for mum") == []
    assert _hits(lexicon, "tamade traffic again") == [("profanity", "tamade")]


def test_contact_rule_only_when_enabled() -> None:
    entry = LexiconEntry("刷单", "spam", 2, "t")
    assert ("spam", "薇信 ab8866123") in _hits(Lexicon.build([entry], contact_rule=True), "加薇信 ab8866123")
    assert _hits(Lexicon.build([entry]), "加薇信 ab8866123") == []


def test_invalid_space_is_rejected() -> None:
    with pytest.raises(ValueError, match="spaces"):
        LexiconEntry("傻逼", "profanity", 2, "t", spaces=("sound",))


ZERO_WIDTH = ("\u200b", "\u200c", "\u200d", "\u2060", "\ufeff")


def _zero_width_between(text: str, offset: int = 0) -> str:
    return text[0] + "".join(ZERO_WIDTH[(offset + i) % len(ZERO_WIDTH)] + c for i, c in enumerate(text[1:]))


@pytest.mark.parametrize(("text", "expected"), [
    ("详情QQ：haoyun888", {"spam"}),  # the contact rule reads the text as sent: QQ split by a ZWSP is still QQ
    ("加微信 ab8866123 领福利", {"spam"}),
    ("哈哈哈你真是个沙雕", set()),  # the affection context (哈哈) reads the text as sent too
    ("你就是个废物", {"harassment"}),
    ("“你怎么还不去死”这种话可能会害死人", set()),  # quoted counter-speech
])
def test_zero_width_characters_hide_nothing_from_any_view(text: str, expected: set[str]) -> None:
    lexicon = default_lexicon()
    plain = {m.category for m in lexicon.find(normalize(text))}
    assert plain == expected
    for offset in range(len(ZERO_WIDTH)):
        evaded = _zero_width_between(text, offset)
        matches = lexicon.find(normalize(evaded))
        assert {m.category for m in matches} == expected, evaded
        for m in matches:  # spans point into the text as sent, zero-width characters and all
            assert evaded[m.start:m.end] == m.matched_text and not m.matched_text.startswith(ZERO_WIDTH)


def test_zero_width_spans_are_the_spans_of_the_text_as_sent() -> None:
    lexicon = default_lexicon()
    text = "加\u200b薇\u200c信 ab8866123"
    assert ("spam", "薇\u200c信 ab8866123") in _hits(lexicon, text)


def test_default_lexicon_loads_the_chinese_lists() -> None:
    lexicon = default_lexicon()
    assert ("violence", "弄死你") in _hits(lexicon, "我今天就弄死你")
    assert _hits(lexicon, "手机巴士这个网站还能上吗") == []


def test_two_latin_initials_in_english_text_are_not_a_pinyin_hit() -> None:
    """Regression: "I'll" held the initials "ll" of 裸聊 (sexual, severity 3), so English text was flagged."""
    from services.common.text_match.zh_pinyin import find_pinyin, readings, term_syllables

    assert find_pinyin("i'll be there at five", term_syllables("裸聊"), initials=True) == []
    assert find_pinyin("ll 你来吗", term_syllables("裸聊"), initials=True) == [(0, 2)]
    assert find_pinyin("nmsl", term_syllables("你妈死了"), initials=True) == [(0, 4)]


def test_a_term_that_addresses_someone_needs_no_other_target() -> None:
    lexicon = default_lexicon()
    assert "harassment" in {m.category for m in lexicon.find(normalize("NMSL"))}  # 你妈死了 by its initials
    assert "harassment" not in {m.category for m in lexicon.find(normalize("这部电影真垃圾"))}  # 垃圾 needs one


def test_a_homophone_that_is_a_dictionary_word_is_no_evasion() -> None:
    # 柜子 (cupboard) sounds like 鬼子; 沙币 is no word, so it stays an evasion of 傻逼
    lexicon = Lexicon.build([LexiconEntry("鬼子", "hate", 3, "t", spaces=("chars", "pinyin")),
                             LexiconEntry("傻逼", "profanity", 2, "t", spaces=("chars", "pinyin"))])
    assert _hits(lexicon, "杀虫剂放在柜子里") == []
    assert _hits(lexicon, "鬼子进村") == [("hate", "鬼子")]
    assert _hits(lexicon, "你个沙币") == [("profanity", "沙币")]


def test_particles_are_read_only_as_particles() -> None:
    # 了 read "liao" made 落了 sound like 裸聊; 聊 itself still matches
    lexicon = Lexicon.build([LexiconEntry("裸聊", "sexual", 3, "t", spaces=("chars", "pinyin"))])
    assert _hits(lexicon, "东西落了") == []
    assert _hits(lexicon, "来落聊吗") == [("sexual", "落聊")]


def test_a_rare_reading_makes_no_homophone() -> None:
    # 才 has a classical reading "zai": 你太有才了 ("you're so talented") sounded like 宰了 ("kill");
    # a second reading that dictionary phrases use still counts (长 zhang / chang, 行 xing / hang)
    lexicon = Lexicon.build([LexiconEntry("宰了", "violence", 3, "t", spaces=("chars", "pinyin"))])
    assert _hits(lexicon, "哈哈哈，你太有才了") == []
    assert _hits(lexicon, "车坏了，是朋友把他载了回来") == []  # and one syllable with a particle is never matched by sound
    assert readings("才") == {"cai"} and readings("长") == {"zhang", "chang"} and readings("行") >= {"xing", "hang"}


@pytest.mark.parametrize("text", ["薇：yy6666", "加V：hh8888", "加tg：@abc888", "详情QQ：haoyun888", "💚信 haoyun668"])
def test_contact_rule_app_letter_before_colon_and_handles(text: str) -> None:
    assert contact_spans(text)


@pytest.mark.parametrize("text", ["版本v: 1.2.3", "坐飞机@上海", "我在tg上", "比分v：3:1", "全国心理援助热线：400-161-9995",
                                  "办公室电话 010-6512 3456"])
def test_contact_rule_app_letter_benign(text: str) -> None:
    assert contact_spans(text) == []
