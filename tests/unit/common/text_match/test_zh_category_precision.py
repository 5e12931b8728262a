"""Which categories the default lexicon gives texts where a second category used to ride along:
group hate is hate (not harassment), a threat against someone's family is violence, swearing at a
thing is profanity (not harassment), a first-person self-statement is no harassment, and 你是不是不想活了
is a threat, not self-harm talk."""

from __future__ import annotations

from functools import lru_cache

import pytest

from services.common.text_match.lexicon import DEFAULT_LEXICON_PATH, Lexicon
from services.common.text_match.normalize import normalize


@lru_cache(maxsize=1)
def lexicon() -> Lexicon:
    return Lexicon.load(DEFAULT_LEXICON_PATH)


def categories(text: str) -> set[str]:
    return {m.category for m in lexicon().find(normalize(text))}


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
