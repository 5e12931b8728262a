"""References to minors (what makes sexual content `sexual/minors`): ages under 18 as people write them,
words naming a child; adults' ages, times, sizes and money are not references."""

from __future__ import annotations

import pytest

from services.text.minors import minor_references


@pytest.mark.parametrize(("text", "found"), [
    ("she is 14 and wants it", ["14"]), ("hey 13f here, dm me", ["13"]), ("M15 looking to chat", ["15"]),
    ("send pics, i know youre only 15", ["15"]), ("my 15 year old son", ["15"]), ("a 12-year-old girl", ["12"]),
    ("she's 16yo", ["16"]), ("he is 9 y/o", ["9"]), ("aged 12", ["12"]), ("I was in 7th grade", ["7th grade"]),
    ("a middle schooler", ["middle schooler"]), ("those KIDS", ["KIDS"]), ("underage girls", ["underage"]),
    ("a little girl", ["little girl"]), ("jailbait", ["jailbait"]),
])
def test_references_to_minors_are_found_with_their_span(text: str, found: list[str]) -> None:
    assert [text[a:b] for a, b in minor_references(text)] == found


@pytest.mark.parametrize("text", [
    "a 25 year old woman", "she is 19", "he is 6 feet tall", "meet at 5pm", "i have 14 dollars", "ages 18+ only",
    "she is 12:30 late", "a 30f from leeds", "only 3 minutes left", "version 14.2 is out", "room 14 please",
    "my wife and I, both 34", "kidney beans",
])
def test_adults_times_sizes_and_money_are_not_references(text: str) -> None:
    assert minor_references(text) == []


def test_spans_are_sorted_and_never_overlap() -> None:
    text = "a 14 year old child and a 13f kid"
    spans = minor_references(text)
    assert spans == sorted(spans) and all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
    assert [text[a:b] for a, b in spans] == ["14", "child", "13", "kid"]
