"""Latin syllables inside Chinese text read back as the phrase rules' characters (zh_syllables.py), alone and
through the default lexicon."""

from __future__ import annotations

from functools import lru_cache

import pytest

from services.common.text_match.lexicon import Lexicon
from services.common.text_match.normalize import normalize
from services.common.text_match.zh_rules import load_rules, parse_rules
from services.common.text_match.zh_syllables import SyllableReader


@lru_cache(maxsize=1)
def reader() -> SyllableReader:
    return SyllableReader(load_rules())


@lru_cache(maxsize=1)
def lexicon() -> Lexicon:
    return Lexicon.load()


@pytest.mark.parametrize(("text", "restored"), [
    ("he南人都shi骗子", "河南人都是骗子"),   # context after the token (南), on both sides (人都 | 骗子)
    ("河nan人都是骗子", "河南人都是骗子"),   # a syllable between two characters of one literal
    ("我zhi道你住哪", "我知道你住哪"),
    ("信不信我nong死你", "信不信我弄死你"),
])
def test_a_syllable_glued_to_han_text_becomes_the_character_its_neighbours_call_for(text: str, restored: str) -> None:
    view = reader().view(normalize(text))
    assert view is not None and view.text == restored


@pytest.mark.parametrize("text", [
    "我们team今天加班",      # not a syllable
    "打call，加油！",
    "hello 你好",           # not glued to Han text
    "今天天气不错",          # no Latin token
    "see you tomorrow",     # no Han text
])
def test_words_that_are_not_glued_syllables_are_left_alone(text: str) -> None:
    assert reader().view(normalize(text)) is None


def test_a_token_two_characters_fit_equally_well_is_not_restored() -> None:
    def rules(*values: str) -> SyllableReader:
        return SyllableReader(parse_rules({"slots": {"X": list(values)}, "rules": [
            {"id": "r", "category": "harassment", "severity": 2, "pattern": "{X}"}]}))

    assert rules("是你", "事你").restore("shi你") == []   # shi: 是 and 事 both complete a literal
    assert rules("是你").restore("shi你") == [(0, 3, "是")]


def test_each_restored_character_points_at_its_whole_token_in_the_original() -> None:
    text = normalize("河ｎａｎ人都是骗子")   # full-width letters fold to nan
    view = reader().view(text)
    assert view is not None and view.text.startswith("河南人")
    assert view.original_span(1, 2) == (1, 4)
    assert view.original == text.original


@pytest.mark.parametrize(("text", "category"), [
    ("he南人都shi骗子", "hate"), ("我shi你爹", "harassment"), ("我zhi道你住哪，出门小心点", "violence"),
    ("你活着就是lang费空气", "harassment"), ("同城yue炮，今晚来", "sexual"),
])
def test_the_lexicon_matches_rules_through_restored_syllables(text: str, category: str) -> None:
    hits = [m for m in lexicon().find(normalize(text)) if m.category == category]
    assert hits, text
    assert all(0 <= m.start < m.end <= len(text) for m in hits)


@pytest.mark.parametrize("text", ["他是he南人，很热情", "你zhi道吗，明天放假", "我shi真的很喜欢这部电影", "明天qu看电影吗",
                                  "东北人真的很豪爽，dong北菜也好吃"])
def test_restored_ordinary_chat_still_fires_no_rule(text: str) -> None:
    assert lexicon().find(normalize(text)) == [], text
