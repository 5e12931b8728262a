"""Tests for services/common/text_match/lexicon.py: boundaries (Scunthorpe), CJK substrings, spans, immutability."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from services.common.text_match.lexicon import DEFAULT_LEXICON_PATH, Lexicon, LexiconEntry
from services.common.text_match.normalize import normalize


def small_lexicon() -> Lexicon:
    return Lexicon.build([
        LexiconEntry("ass", "profanity", 1, "test"),
        LexiconEntry("cunt", "profanity", 2, "test"),
        LexiconEntry("fuck", "profanity", 2, "test"),
        LexiconEntry("shit", "profanity", 2, "test"),
        LexiconEntry("傻逼", "profanity", 2, "test"),
        LexiconEntry("操你", "profanity", 2, "test"),
        LexiconEntry("操你妈", "profanity", 3, "test"),
        LexiconEntry("狗sN", "hate", 1, "test"),
        LexiconEntry("kill you", "violence", 2, "test"),
    ])


def found(text: str, lexicon: Lexicon | None = None) -> list[tuple[str, int, int, str]]:
    matches = (lexicon or small_lexicon()).find(normalize(text))
    return [(m.term, m.start, m.end, m.matched_text) for m in matches]


@pytest.mark.parametrize("text", ["class", "assassin", "Scunthorpe", "passage", "grass-fed", "bass3"])
def test_scunthorpe_words_do_not_match(text: str) -> None:
    assert found(text) == []


def test_latin_term_matches_as_a_whole_word() -> None:
    assert found("you ass!") == [("ass", 4, 7, "ass")]
    assert found("Class, you a$$") == [("ass", 11, 14, "a$$")]


def test_latin_term_next_to_cjk_matches() -> None:
    assert found("我ass") == [("ass", 1, 4, "ass")]


def test_full_width_and_separators_in_chinese() -> None:
    assert found("你个傻　.　逼") == [("傻逼", 2, 7, "傻　.　逼")]


def test_cjk_term_matches_as_substring() -> None:
    assert found("你这个傻逼啊") == [("傻逼", 3, 5, "傻逼")]


def test_traditional_text_matches_simplified_term() -> None:
    lexicon = Lexicon.build([LexiconEntry("鸡巴", "profanity", 2, "test")])
    assert found("你個雞巴", lexicon) == [("鸡巴", 2, 4, "雞巴")]


def test_traditional_term_matches_simplified_text() -> None:
    lexicon = Lexicon.build([LexiconEntry("雞巴", "profanity", 2, "test")])
    assert found("你个鸡巴", lexicon) == [("鸡巴", 2, 4, "鸡巴")]


def test_leet_and_spelled_out_matches_report_the_original_surface() -> None:
    assert found("sh1t and f.u.c.k") == [("shit", 0, 4, "sh1t"), ("fuck", 9, 16, "f.u.c.k")]


def test_zero_width_inside_word_matches_with_original_span() -> None:
    assert found("oh fu\u200bck") == [("fuck", 3, 8, "fu\u200bck")]


def test_overlapping_matches_are_all_kept() -> None:
    assert found("操你妈") == [("操你", 0, 2, "操你"), ("操你妈", 0, 3, "操你妈")]


def test_mixed_term_needs_a_boundary_on_its_latin_edge_only() -> None:
    assert found("狗sN!") == [("狗sn", 0, 3, "狗sN")]
    assert found("狗snake") == []


def test_multi_word_term_with_collapsed_whitespace() -> None:
    assert found("I will KILL \n YOU") == [("kill you", 7, 17, "KILL \n YOU")]


def test_same_category_and_span_keeps_highest_severity() -> None:
    lexicon = Lexicon.build([LexiconEntry("ass", "profanity", 1, "a"), LexiconEntry("a$$", "profanity", 3, "b")])
    [match] = lexicon.find(normalize("ass"))
    assert (match.severity, match.source) == (3, "b")


def test_different_categories_on_one_span_are_both_reported() -> None:
    lexicon = Lexicon.build([LexiconEntry("slut", "hate", 2, "a"), LexiconEntry("slut", "sexual", 1, "b")])
    assert [m.category for m in lexicon.find(normalize("slut"))] == ["hate", "sexual"]


def test_match_json_has_the_output_fields() -> None:
    [match] = small_lexicon().find(normalize("傻逼"))
    assert match.to_json() == {"category": "profanity", "term": "傻逼", "severity": 2, "start": 0, "end": 2,
                               "text": "傻逼", "source": "test"}


def test_lexicon_is_immutable() -> None:
    lexicon = small_lexicon()
    with pytest.raises(AttributeError):
        lexicon._entries = ()


def test_version_is_a_content_hash() -> None:
    assert small_lexicon().version == small_lexicon().version
    assert Lexicon.build([LexiconEntry("ass", "profanity", 2, "test")]).version != small_lexicon().version


def test_empty_lexicon_finds_nothing() -> None:
    assert Lexicon.build([]).find(normalize("anything")) == []


@pytest.mark.parametrize("kwargs, field", [
    ({"term": "", "category": "profanity", "severity": 2}, "term"),
    ({"term": "x", "category": "drugs", "severity": 2}, "category"),
    ({"term": "x", "category": "profanity", "severity": 4}, "severity"),
    ({"term": "x", "category": "profanity", "severity": True}, "severity"),
])
def test_entry_validation_names_the_field(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        LexiconEntry(source="test", **kwargs)  # type: ignore[arg-type]


def test_term_that_normalises_to_nothing_is_rejected() -> None:
    with pytest.raises(ValueError, match="term"):
        Lexicon.build([LexiconEntry("\u200b", "profanity", 2, "test")])


def test_default_lexicon_loads_and_has_the_common_chinese_terms() -> None:
    lexicon = Lexicon.load(DEFAULT_LEXICON_PATH)
    terms = {normalize(e.term).text for e in lexicon.entries}
    assert {"傻逼", "操你妈", "fuck", "shit"} <= terms
    assert found("傻　.　逼 and Scunthorpe class", lexicon) == [("傻逼", 0, 5, "傻　.　逼")]


def test_default_lexicon_file_is_consistent(tmp_path: Path) -> None:
    document = json.loads(DEFAULT_LEXICON_PATH.read_text(encoding="utf-8"))
    own = Lexicon.build(LexiconEntry(e["term"], e["category"], int(e["severity"]), e["source"])
                        for e in document["entries"])  # the version covers the file's own entries, not its includes
    lexicon = Lexicon.load(DEFAULT_LEXICON_PATH)
    assert document["version"] == own.version
    assert document["counts"]["entries"] == len(document["entries"]) == len(own) < len(lexicon)
    assert all(source in document["licenses"] for source in {e.source for e in own.entries})


def test_load_rejects_unknown_format(tmp_path: Path) -> None:
    path = tmp_path / "lexicon.json"
    path.write_text(json.dumps({"format": "other", "entries": []}))
    with pytest.raises(ValueError, match="format"):
        Lexicon.load(path)


def test_a_latin_word_also_matches_its_plural_and_nothing_longer() -> None:
    lexicon = Lexicon.build([LexiconEntry("spic", "hate", 3, "t"), LexiconEntry("ass", "profanity", 1, "t")])

    def found(text: str) -> list[tuple[str, str]]:
        return [(m.term, m.matched_text) for m in lexicon.find(normalize(text))]

    assert found("two spics here") == [("spic", "spics")]
    assert found("you asses") == [("ass", "asses")]
    assert found("spicy food, spicier still, classes and glasses") == []
