"""The variant view's recomposition of split characters (zh_variants._recompose)."""

from __future__ import annotations

import pytest

from services.common.text_match.normalize import normalize
from services.common.text_match.zh_variants import variant_view
from tests.stubs import default_lexicon


@pytest.mark.parametrize(("text", "recomposed"), [
    ("扌喿你女马", "操你妈"), ("犭句东西", "狗东西"), ("这个主播就是个又鸟巴", "这个主播就是个鸡巴"),
])
def test_split_forms_segmented_as_single_components_are_recomposed(text: str, recomposed: str) -> None:
    view = variant_view(normalize(text))
    assert view is not None and view.text == recomposed


@pytest.mark.parametrize("text", ["走了一个小时", "我傻了一下", "你说了一句傻话", "打了一顿就好了"])
def test_regression_le_yi_is_not_recomposed_to_zi_across_a_word(text: str) -> None:
    # 了 + 一 compose 子 in the decomposition table; here 一 belongs to 一个/一下/一句/一顿
    view = variant_view(normalize(text))
    assert view is None or "子" not in view.text, view.text


def categories(text: str) -> set[str]:
    return {m.category for m in default_lexicon().find(normalize(text))}


@pytest.mark.parametrize(("text", "category"), [
    ("你怎么还不去4", "self_harm"),   # a digit after a Han character at the end of a clause
    ("东北人都是pian子", "hate"),      # a syllable of a rule's key character typed in Latin letters
    ("河南人都是骗zi", "hate"),
])
def test_digit_and_syllable_words_complete_rules(text: str, category: str) -> None:
    assert category in categories(text)


@pytest.mark.parametrize("text", ["我4点到", "还剩4", "第4", "这个zi我不认识", "我们去kan电影"])
def test_digit_and_syllable_words_alone_are_benign(text: str) -> None:
    assert categories(text) == set()


@pytest.mark.parametrize(("text", "joined"), [("楼上就是个lā jī", "楼上就是个垃圾"), ("楼上就是个la ji", "楼上就是个垃圾")])
def test_spaced_and_tone_marked_syllables_next_to_han_are_joined(text: str, joined: str) -> None:
    view = variant_view(normalize(text))
    assert view is not None and view.text == joined
    assert "harassment" in categories(text)


@pytest.mark.parametrize("text", ["I love you so much", "我说 ok then，走吧"])
def test_spaced_words_away_from_han_or_ordinary_are_left_benign(text: str) -> None:
    # joined syllables (then laji -> 垃圾) only matter where they complete a listed term
    assert variant_view(normalize("I love you so much")) is None
    assert categories(text) == set()


@pytest.mark.parametrize(("text", "category"), [
    ("我~要~弄~s~i~你", "violence"), ("u、p、主真是个废柴", "harassment"), ("你#怎#么#还#不#去#4", "self_harm"),
    ("二楼，nmslnmsl", "harassment"), ("tmdtmd，电脑又蓝屏了", "profanity"),
])
def test_mixed_script_separators_and_repeated_units(text: str, category: str) -> None:
    assert category in categories(text)


def test_repeated_unit_maps_back_to_the_whole_run() -> None:
    view = variant_view(normalize("tmdtmd"))
    assert view is not None and view.text == "tmd" and view.original_span(0, 3) == (0, 6)
    assert categories("我喜欢 Python 编程，hahaha") == set()
