"""Which script a character belongs to, and how many words of non-CJK letters a text holds."""

from __future__ import annotations

import pytest

from services.common.text_match.scripts import has_cjk, is_cjk, latin_words


@pytest.mark.parametrize("text, words", [
    ("", 0), ("666 😊 !!!", 0), ("你好", 0), ("打call，加油！", 1), ("我们team今天ok", 2), ("i will find you", 4),
    ("Ωmega тест", 2), ("don't", 2), ("ｈｅｌｌｏ", 1), ("ＯＫ你好", 1), ("カタカナ", 0), ("한국어 ok", 1),
])
def test_latin_words_counts_runs_of_letters_outside_cjk(text: str, words: int) -> None:
    assert latin_words(text) == words


def test_cjk_and_word_characters() -> None:
    assert is_cjk("逼") and is_cjk("カ") and is_cjk("한") and not is_cjk("a")
    assert has_cjk("gg 你好") and not has_cjk("hello")
