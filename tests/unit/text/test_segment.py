"""Tests for services/text/segment.py and the boundary filter: evasions are caught, straddling matches dropped."""

from __future__ import annotations

import pytest

from services.common.text_match.lexicon import Lexicon
from services.common.text_match.normalize import normalize
from services.text.segment import segment, split_token

LEXICON = Lexicon.load()


def terms(text: str) -> set[str]:
    return {m.term for m in LEXICON.find(segment(normalize(text)))}


@pytest.mark.parametrize("token,pieces", [("youareanidiot", ("you", "are", "an", "idiot")),
                                          ("gofuckyourself", ("go", "fuck", "yourself")),
                                          ("killyourself", ("kill", "yourself"))])
def test_unspaced_abuse_is_split(token: str, pieces: tuple[str, ...]) -> None:
    assert split_token(token) == pieces


@pytest.mark.parametrize("token", ["penistone", "scunthorpe", "therapist", "classic", "cocktail", "dumbass", "short"])
def test_words_and_place_names_stay_whole(token: str) -> None:
    assert split_token(token) == (token,)


def test_segmented_offsets_point_at_the_original() -> None:
    seen = segment(normalize("OK gofuckyourself!"))
    assert seen.text == "ok go fuck yourself!"
    start = seen.text.index("fuck")
    assert seen.original_text(start, start + 4) == "fuck"
    assert seen.original_span(start, start + 4) == (5, 9)


@pytest.mark.parametrize("text,term", [("gofuckyourself", "fuck"), ("f u c k off", "fuck"), ("ｆｕｃｋ off", "fuck"),
                                       ("sh1t happens", "shit"), ("fuuuuck", "fuck"), ("іdіоt nіggеr", "nigger")])
def test_evasions_are_caught(text: str, term: str) -> None:
    assert term in terms(text)


@pytest.mark.parametrize("text,term", [("the therapist was kind", "rapist"), ("Scunthorpe United won", "cunt"),
                                       ("we took the train to Penistone", "penis"), ("a classic class", "ass"),
                                       ("cocktails at five", "cock")])
def test_matches_straddling_a_word_are_dropped(text: str, term: str) -> None:
    assert term not in terms(text)


def test_unchanged_text_is_returned_as_is() -> None:
    seen = normalize("nothing to split here")
    assert segment(seen) is seen


def test_a_listed_word_and_its_plural_are_never_split() -> None:
    keep = frozenset({"jigaboo"})
    assert segment(normalize("jigaboo")).text == "jig a boo"  # what wordninja alone does
    assert segment(normalize("jigaboo"), keep).text == "jigaboo"
    assert segment(normalize("jigaboos everywhere"), keep).text == "jigaboos everywhere"
    assert segment(normalize("youareanidiot"), keep).text == "you are an idiot"


@pytest.mark.parametrize("text, expected", [
    ("sendnudesbabe", "send nudes babe"),                        # three content words, no function word
    ("holyshitthatplottwist", "holy shit that plot twist"),      # "that"
    ("don'tcometothereunion", "don't come to the reunion"),      # the run after the apostrophe starts with "t"
])
def test_phrases_and_contractions_split(text: str, expected: str) -> None:
    assert segment(normalize(text)).text == expected


@pytest.mark.parametrize("word", ["penistone", "grasshopper", "therapist", "butterfingers", "throwbackthursday"])
def test_words_and_two_part_compounds_stay_whole(word: str) -> None:
    assert segment(normalize(word)).text == word
