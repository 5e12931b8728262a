"""`LatinSpellings` (the token lookup the lexicon uses on text without Han characters) gives exactly
what `find_pinyin` gives per term, on listed terms and on tokens built to sit near their spellings."""

from __future__ import annotations

import itertools
import random

import pytest

from services.common.text_match.lexicon import DEFAULT_LEXICON_PATH, Lexicon
from services.common.text_match.normalize import normalize
from services.common.text_match.zh_pinyin import LatinSpellings, find_pinyin, term_syllables

_TERMS = ("你妈死了", "傻逼", "操你妈", "去死", "草泥马", "脑残", "自杀", "他妈的", "婊子")


def _per_term(text: str, terms: list[tuple[tuple[str, ...], bool]]) -> dict[int, list[tuple[int, int]]]:
    found = {position: find_pinyin(text, syllables, initials=initials)
             for position, (syllables, initials) in enumerate(terms)}
    return {position: spans for position, spans in found.items() if spans}


def _near_spellings(terms: list[tuple[tuple[str, ...], bool]], rng: random.Random) -> list[str]:
    """Each term's full and initials spellings, truncated, extended and with a letter changed."""
    tokens = []
    for syllables, _ in terms:
        for parts in itertools.product(*[(s, s[0]) for s in syllables]):
            spelling = "".join(parts)
            tokens += [spelling, spelling[:-1], spelling + "a", spelling[1:],
                       spelling[:-1] + rng.choice("abcdefghijklmnopqrstuvwxyz")]
    return tokens


@pytest.mark.parametrize("initials", [True, False])
def test_latin_spellings_agree_with_find_pinyin(initials: bool) -> None:
    rng = random.Random(7)
    terms = [(term_syllables(term), initials) for term in _TERMS]
    spellings = LatinSpellings(terms)
    tokens = _near_spellings(terms, rng) + ["made", "nmsl", "shabi", "i", "ll", "cnm", "tmd", "sb"]
    for _ in range(300):
        text = " ".join(rng.sample(tokens, rng.randint(1, 6))) + rng.choice(["", "!", " 123", ", ok"])
        assert spellings.find(text) == _per_term(text, terms), text
    assert spellings.uncovered == frozenset()


def test_the_default_lexicon_matches_the_same_with_and_without_the_lookup() -> None:
    """The lexicon's lookup path against its per-term path (a lookup that covers nothing)."""
    fast = Lexicon.load(DEFAULT_LEXICON_PATH)
    slow = Lexicon.load(DEFAULT_LEXICON_PATH)
    object.__setattr__(slow, "_spellings", LatinSpellings([((), False)] * len(slow._phonetic)))
    texts = ["lol nmsl and shabi", "you are sb lol", "caonima tmd", "I made a cake, cnm",
             "wsnd hahaha rnm tuiqian", "naocan ni", "qusi ba", "the chaos theory", "zisha"]
    for text in texts:
        assert fast.find(normalize(text)) == slow.find(normalize(text)), text
    assert any(fast.find(normalize(t)) for t in texts)


def test_terms_that_are_not_plain_letters_are_left_to_find_pinyin() -> None:
    spellings = LatinSpellings([((), False), (("sha", "bi"), False), (("x",) * 11, True)])
    assert spellings.uncovered == frozenset({0, 2})
    assert spellings.find("shabi") == {1: [(0, 5)]}
