"""Tests for services/common/text_match/normalize.py: each folding step and exact offsets back to the input."""

from __future__ import annotations

import pytest

from services.common.text_match.normalize import NormalizedText, normalize, visible_chars


def surface(text: str, needle: str) -> str:
    """The original text behind the first occurrence of `needle` in the normalised text."""
    normalized = normalize(text)
    start = normalized.text.index(needle)
    return normalized.original_text(start, start + len(needle))


def test_full_width_latin_becomes_ascii_with_identity_offsets() -> None:
    normalized = normalize("ｆｕｃｋ you")
    assert normalized.text == "fuck you"
    assert normalized.offsets == (0, 1, 2, 3, 4, 5, 6, 7)
    assert normalized.original_span(0, 4) == (0, 4)
    assert normalized.original_text(0, 4) == "ｆｕｃｋ"


def test_full_width_space_and_separator_between_cjk_are_removed() -> None:
    normalized = normalize("傻　.　逼")
    assert normalized.text == "傻逼"
    assert normalized.offsets == (0, 4)
    assert normalized.original_span(0, 2) == (0, 5)
    assert normalized.original_text(0, 2) == "傻　.　逼"


@pytest.mark.parametrize("text", ["傻.逼", "傻 逼", "傻＊逼", "傻_-_逼", "傻|逼", "傻~逼", "傻\u200b逼"])
def test_separator_variants_between_cjk(text: str) -> None:
    assert normalize(text).text == "傻逼"
    assert surface(text, "傻逼") == text


def test_cjk_span_inside_a_sentence_maps_back_exactly() -> None:
    text = "你个傻 * 逼啊"
    assert normalize(text).text == "你个傻逼啊"
    assert surface(text, "傻逼") == "傻 * 逼"


@pytest.mark.parametrize("text", ["f.u.c.k", "f u c k", "f-u-c-k", "F . U . C . K", "f*u*c*k"])
def test_spelled_out_latin_word_is_joined(text: str) -> None:
    normalized = normalize(text)
    assert normalized.text == "fuck"
    assert normalized.original_text(0, 4) == text


def test_two_single_letters_are_not_joined() -> None:
    assert normalize("a b").text == "a b"
    assert normalize("i.e. this").text == "i.e. this"


def test_apostrophe_does_not_join_single_letters() -> None:
    assert normalize("I'm a fan").text == "i'm a fan"


def test_leet_folds_inside_words_with_letters_only() -> None:
    assert normalize("sh1t").text == "shit"
    assert normalize("in 2024 at 10am on the 2nd").text == "in 2024 at 10am on the 2nd"
    assert normalize("a$$ @ss b!tch").text == "ass ass bitch"
    assert normalize("WINNER!! hello!").text == "winner!! hello!"


def test_leet_keeps_one_to_one_offsets() -> None:
    normalized = normalize("you sh1t")
    assert normalized.text == "you shit"
    assert normalized.original_text(4, 8) == "sh1t"


def test_digits_next_to_cjk_are_not_leet() -> None:
    assert normalize("微信1").text == "微信1"


def test_traditional_chinese_becomes_simplified() -> None:
    normalized = normalize("幹你娘 頭髮 雞巴")
    assert normalized.text == "干你娘头发鸡巴"
    assert normalized.original_text(5, 7) == "雞巴"


def test_zero_width_characters_inside_a_word_are_dropped() -> None:
    text = "fu\u200bc\u200dk\ufeff off"
    normalized = normalize(text)
    assert normalized.text == "fuck off"
    assert normalized.original_text(0, 4) == "fu\u200bc\u200dk"


def test_visible_chars_drops_format_and_control_characters_and_keeps_whitespace() -> None:
    text = "微\u200b信\u200c：\u2060a\ufeffb\u200d1\x07\n2"
    stripped, kept = visible_chars(text)  # type: ignore[misc]
    assert stripped == "微信：ab1\n2"
    assert [text[i] for i in kept] == list(stripped)
    assert visible_chars("傻逼 ab\n12") is None and visible_chars("") is None


def test_control_characters_dropped_and_whitespace_collapsed() -> None:
    normalized = normalize("  hello\t\n\x07 world  ")
    assert normalized.text == "hello world"
    assert normalized.original_text(0, 11) == "hello\t\n\x07 world"


def test_homoglyphs_fold_to_latin() -> None:
    assert normalize("ѕех").text == "sex"  # Cyrillic dze, ie, ha
    assert normalize("fυck").text == "fuck"  # Greek upsilon


def test_case_folding_and_diacritics() -> None:
    assert normalize("STRAẞE Café naïve").text == "strasse cafe naive"


def test_expanding_character_keeps_one_offset_per_output_char() -> None:
    normalized = normalize("ﬁne")  # the ligature becomes two characters
    assert normalized.text == "fine"
    assert normalized.offsets == (0, 0, 1, 2)
    assert normalized.original_span(0, 2) == (0, 1)


def test_runs_of_three_or_more_letters_collapse_to_one() -> None:
    normalized = normalize("fuuuuck cool 1000")
    assert normalized.text == "fuck cool 1000"
    assert normalized.original_text(0, 4) == "fuuuuck"


def test_math_and_circled_letters() -> None:
    assert normalize("𝐟𝐮𝐜𝐤 ⓕⓤⓒⓚ").text == "fuck fuck"


def test_empty_and_only_invisible() -> None:
    assert normalize("").text == ""
    assert normalize("\u200b\u200c").text == ""
    assert normalize("\u200b").original_span(0, 0) == (1, 1)


def test_original_span_rejects_out_of_range() -> None:
    with pytest.raises(ValueError, match="span"):
        normalize("abc").original_span(2, 5)


def test_normalized_text_validates_lengths() -> None:
    with pytest.raises(ValueError, match="offsets"):
        NormalizedText("ab", (0,), "ab")


def test_pure_han_fast_path_relies_on_unified_han_folding_to_itself() -> None:
    # normalize() returns a text of simplified unified Han characters as is; that is only right while
    # every such character folds to itself (NFKC, case folding, t2s) and repeats still collapse
    from services.common.text_match.normalize import _fold_char, _simplified

    simplified = _simplified()
    changed = [c for c in map(chr, range(0x4E00, 0xA000)) if c not in simplified and _fold_char(c) != c]
    assert changed == []
    assert normalize("哈哈哈好").text == "哈好"
    assert normalize("說話").text == "说话"


def test_negative_circled_and_squared_letters_and_regional_indicators_fold_to_latin() -> None:
    # NFKC leaves these letter-symbols alone; written out they spell words the models must read
    assert normalize("🅺🅸🅻🅻 🆈🅾🆄").text == "kill you"
    assert normalize("🅚🅘🅛🅛").text == "kill"
    assert normalize("🇰🇮🇱🇱 🇾🇴🇺").text == "kill you"  # 🇰🇮 is a flag, 🇱🇱 none: letters all the same
    assert normalize("🇳🇮🇬🇬🇪🇷").text == "nigger"  # three real flags in a row spell a slur
    spaced = normalize("🇰 🇮 🇱 🇱 yourself")
    assert spaced.text == "kill yourself" and spaced.original_text(0, 4) == "🇰 🇮 🇱 🇱"
    assert normalize("go 🇫🇷!").text == "go fr!"  # a real flag reads as its region code
