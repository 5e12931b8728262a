"""The models' view of a text: emoji written out as their names, offsets kept (services/text/emoji_text.py)."""

from __future__ import annotations

import pytest

from services.common.text_match.normalize import normalize
from services.text.emoji_text import MAX_NAMED, describe_emoji, emoji_name
from services.text.segment import segment


def test_an_emoji_only_message_reads_as_its_name() -> None:
    assert describe_emoji(normalize("😊")).text == "smiling face with smiling eyes"
    assert describe_emoji(normalize("🍕🍕")).text == "slice of pizza"


def test_text_without_emoji_is_returned_as_it_is() -> None:
    text = normalize("see you at the station")
    assert describe_emoji(text) is text
    accented = normalize("café à 5h")  # not ASCII, still no emoji
    assert describe_emoji(accented).text == accented.text


def test_every_character_of_a_name_points_at_its_emoji() -> None:
    original = "ok 👍 thanks"
    view = describe_emoji(normalize(original))
    assert view.text == "ok thumbs up sign thanks"
    start = view.text.index("thumbs")
    end = start + len("thumbs up sign")
    first, last = view.original_span(start, end)
    assert original[first:last] == "👍"
    first, last = view.original_span(view.text.index("thanks"), len(view.text))
    assert original[first:last] == "thanks"


def test_skin_tones_are_dropped_and_runs_of_one_emoji_written_once() -> None:
    assert describe_emoji(normalize("👍🏽")).text == "thumbs up sign"
    assert describe_emoji(normalize("lol 😂 😂😂 ok")).text == "lol face with tears of joy ok"
    assert describe_emoji(normalize("😂 ha 😂")).text == "face with tears of joy ha face with tears of joy"


def test_at_most_max_named_emoji_are_written() -> None:
    many = "".join(chr(0x1F600 + i) for i in range(MAX_NAMED + 10)) + " hello"
    view = describe_emoji(normalize(many))
    assert view.text.endswith(" hello")
    assert view.text.count(" face") <= MAX_NAMED


@pytest.mark.parametrize(("char", "expected"), [("a", None), ("你", None), ("1", None), ("🏿", ""), ("🇬", "flag"),
                                                ("🔥", "fire"), ("♥", "black heart suit")])
def test_emoji_name(char: str, expected: str | None) -> None:
    assert emoji_name(char) == expected


def test_chinese_text_keeps_its_characters_beside_the_name() -> None:
    assert describe_emoji(normalize("你好😊")).text == "你好 smiling face with smiling eyes"


def test_the_view_follows_segmentation() -> None:
    view = describe_emoji(segment(normalize("youareanidiot 🤡")))
    assert view.text == "you are an idiot clown face"
