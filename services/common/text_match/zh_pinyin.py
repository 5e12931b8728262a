"""The pinyin matching space: listed Chinese terms found by sound, not by character.

Evaders write a listed term with other characters of the same sound (沙币 for 傻逼, 费物 for 废物),
with its syllables in Latin letters (sha逼, nao残, zisha) or with its pinyin initials (nmsl, cnm).
A term's toneless syllables come from pypinyin (dictionary in the wheel); the text's units are its
normalised characters: a Han character may stand for any of its readings, Latin letters spell
syllables or (for entries that allow it) initials. Common syllables make short homophones frequent
in benign text, so the WHOLE term must be matched, and callers apply the same word-boundary and
context checks as for character hits.

Example::

    >>> find_pinyin("你这么个沙币", term_syllables("傻逼"), initials=False)
    [(4, 6)]
    >>> find_pinyin("nmsl", term_syllables("你妈死了"), initials=True)
    [(0, 4)]
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from collections import Counter, defaultdict
from functools import lru_cache
from typing import Sequence

from pypinyin import Style, lazy_pinyin, pinyin

from services.common.text_match.english_words import is_common_english

__all__ = ["LatinSpellings", "StartIndex", "find_pinyin", "readings", "term_syllables"]


def term_syllables(term: str) -> tuple[str, ...]:
    """The toneless syllables of a Chinese term (phrase-aware: pypinyin's phrase dictionary)."""
    return tuple(s.lower() for s in lazy_pinyin(term, style=Style.NORMAL, errors="default"))


#: grammatical particles read only as particles: their rare readings (了 liǎo, 着 zháo, 的 dì) made
#: ordinary phrases sound like listed terms (落了 "luo liao" = 裸聊), and no evader writes them for those
_PARTICLE_READINGS = {"了": "le", "着": "zhe", "的": "de", "得": "de", "么": "me", "呢": "ne", "吧": "ba", "啊": "a"}


#: a Han character's second or later reading counts only when at least this many of pypinyin's
#: dictionary phrases read it so (`readings`)
MIN_PHRASES_FOR_A_READING = 3
_TONED_U = str.maketrans({"ü": "v", "ǖ": "v", "ǘ": "v", "ǚ": "v", "ǜ": "v"})


@lru_cache(maxsize=1)
def _phrase_readings() -> dict[str, Counter[str]]:
    """Per Han character, how many of pypinyin's dictionary phrases read it with each toneless reading."""
    from pypinyin.phrases_dict import phrases_dict  # the phrase table lazy_pinyin already loads
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    for phrase, syllables in phrases_dict.items():
        if len(phrase) != len(syllables):
            continue
        for char, options in zip(phrase, syllables):
            counts[char][_toneless(options[0])] += 1
    return dict(counts)


def _toneless(syllable: str) -> str:
    decomposed = unicodedata.normalize("NFD", syllable.translate(_TONED_U))
    return "".join(c for c in decomposed if not unicodedata.combining(c)).lower()


@lru_cache(maxsize=65536)
def readings(char: str) -> frozenset[str]:
    """The toneless readings of one Han character an evader could write it for: its first
    (commonest) reading, and any other that at least `MIN_PHRASES_FOR_A_READING` dictionary phrases
    use (a character no phrase holds keeps them all). A particle has only its particle reading;
    anything else has none. Rare readings made ordinary words sound like listed terms: 才 has a
    classical reading zai, so 你太有才了 read as 宰了 ("kill").

    Example::

        >>> sorted(readings("才")), sorted(readings("长")), sorted(readings("和"))
        (['cai'], ['chang', 'zhang'], ['he', 'huo'])
    """
    if not ("\u3400" <= char <= "\u9fff" or "\uf900" <= char <= "\ufaff"):
        return frozenset()
    if char in _PARTICLE_READINGS:
        return frozenset((_PARTICLE_READINGS[char],))
    result = pinyin(char, style=Style.NORMAL, heteronym=True, errors="ignore")
    options = [r.lower() for group in result for r in group if r.isascii() and r.isalpha()]
    used = _phrase_readings().get(char)
    if used is None:
        return frozenset(options)
    return frozenset(r for index, r in enumerate(options) if index == 0 or used[r] >= MIN_PHRASES_FOR_A_READING)


_LATIN_RUN = re.compile("[a-z]+")


def _is_latin(char: str) -> bool:
    return len(char) == 1 and "a" <= char <= "z"


class StartIndex:
    """Where a match can start in one text: Han characters by reading, Latin word starts by letter.

    Built once per text, so each listed term only tries the few positions its first syllable can
    start at (a long Latin-only text has none for most terms) instead of every position. Built from
    the text's DISTINCT characters: positions are found (str.find) only for a syllable some character
    of the text can be read as, so a long text costs a set of its characters, not a Python loop
    over every one."""

    def __init__(self, text: str) -> None:
        self._text = text
        #: reading -> the text's Han characters with that reading
        self._chars: dict[str, list[str]] = {}
        distinct = set(text)
        for char in sorted(distinct):
            if not _is_latin(char):
                for reading in readings(char):
                    self._chars.setdefault(reading, []).append(char)
        #: whether the text has a Han character with a known reading
        self.han = bool(self._chars)
        self._letters = frozenset(c for c in distinct if _is_latin(c))
        self._found: dict[str, list[int]] = {}  # syllable -> starts
        self._latin: dict[str, list[int]] = {}  # letter -> starts of Latin runs
        self._tokens: dict[tuple[str, int], dict[str, list[int]]] | None = None

    def can_spell(self, syllables: tuple[str, ...], initials: bool) -> bool:
        """False when some syllable has neither a Han character with that reading nor a Latin
        spelling in the text (the syllable itself, or with `initials` its first letter): no span can
        then sound like the term (a cheap test before matching)."""
        return all(s in self._chars or not s or (s[:1] in self._letters if initials else s in self._text)
                   for s in syllables)

    def first_keys(self) -> set[str]:
        """Where a match can begin: every reading of the text's Han characters, and each letter that
        starts a run of Latin letters (as "latin:<letter>"). A term whose first syllable is neither
        (nor starts with such a letter) cannot match, which callers use to skip it without a call."""
        keys = set(self._chars)
        if self._letters:
            keys.update("latin:" + match.group()[0] for match in _LATIN_RUN.finditer(self._text))
        return keys

    def starts(self, syllable: str) -> list[int]:
        """Candidate start positions for a match whose first syllable is `syllable`, ascending."""
        found = self._found.get(syllable)
        if found is None:
            positions = [p for char in self._chars.get(syllable, ()) for p in _occurrences(self._text, char)]
            if _is_latin(syllable[:1]):
                positions.extend(self._latin_starts(syllable[0]))
            found = self._found[syllable] = sorted(positions)  # Han characters and letters never coincide
        return found

    def tokens(self, letter: str, length: int) -> dict[str, list[int]]:
        """The text's runs of Latin letters that start with `letter` and have `length` letters,
        each with its start positions (ascending)."""
        if self._tokens is None:
            self._tokens = {}
            for match in _LATIN_RUN.finditer(self._text):
                token = match.group()
                self._tokens.setdefault((token[0], len(token)), {}).setdefault(token, []).append(match.start())
        return self._tokens.get((letter, length), {})

    def _latin_starts(self, letter: str) -> list[int]:
        found = self._latin.get(letter)
        if found is None:
            text = self._text
            found = self._latin[letter] = [p for p in _occurrences(text, letter)
                                                 if p == 0 or not _is_latin(text[p - 1])]
        return found


def _occurrences(text: str, char: str) -> list[int]:
    positions: list[int] = []
    position = text.find(char)
    while position >= 0:
        positions.append(position)
        position = text.find(char, position + 1)
    return positions


def find_pinyin(text: str, syllables: tuple[str, ...], *, initials: bool,
                index: StartIndex | None = None) -> list[tuple[int, int]]:
    """Spans of `text` (normalised: lower-case) that sound like `syllables`.

    Each syllable matches one Han character with that reading, or the syllable spelled in Latin
    letters, or (with `initials`) its first letter. Latin edges must not touch other Latin letters
    ("chaos" does not hold "cao"). A span of Latin letters only needs at least 3 of them when the text
    has no Han character: two-letter initials are everywhere in English ("I'll" holds "ll").
    Pass the text's `StartIndex` when matching many terms against one text.
    """
    if not syllables:
        return []
    found: list[tuple[int, int]] = []
    index = index or StartIndex(text)
    if not index.can_spell(syllables, initials):
        return []
    if not index.han and all(s.isascii() and s.isalpha() for s in syllables):
        return _whole_tokens(syllables, initials, index)
    first = syllables[0]
    for start in index.starts(first):
        if not initials and _is_latin(text[start]) and not text.startswith(first, start):
            continue  # cheap pre-check: a Latin start must spell the whole first syllable (long English texts)
        end = _match_from(text, start, syllables, 0, initials)
        if end is not None and not (end < len(text) and _is_latin(text[end - 1]) and _is_latin(text[end])) \
                and not _short_latin_in_latin_text(text, start, end, index):
            found.append((start, end))
    return found


def _whole_tokens(syllables: tuple[str, ...], initials: bool, index: StartIndex) -> list[tuple[int, int]]:
    """`find_pinyin` for a text without Han characters and a term spelled in letters: a match is
    then a whole Latin token (it starts where a run of letters starts, cannot cross a non-letter and
    must not end inside the run) of at least 3 letters, so each DISTINCT token of a plausible length
    is tried once instead of every occurrence. A token that is a common English word ("made" spells
    ma de) is English, not pinyin (`english_words`)."""
    spelled = sum(len(s) for s in syllables)
    shortest = max(3, len(syllables) if initials else spelled)
    found: list[tuple[int, int]] = []
    for length in range(shortest, spelled + 1):
        for token, positions in index.tokens(syllables[0][0], length).items():
            if _match_from(token, 0, syllables, 0, initials) == length and not is_common_english(token):
                found.extend((p, p + length) for p in positions)
    return sorted(found)


#: terms with more syllables than this are not expanded by `LatinSpellings` (2**n initials spellings)
_MAX_EXPANDED_SYLLABLES = 10


class LatinSpellings:
    """Every Latin spelling of a list of terms, for texts without Han characters.

    In such a text `find_pinyin` can only match a whole Latin token (`_whole_tokens`), so instead of
    trying each term against the text, the text's distinct tokens are looked up in a table of the
    spellings each term accepts: the full syllables, and with `initials` every mix of full syllables
    and first letters, each kept only if `_whole_tokens` would accept it as a token. The answers are
    the same as calling `find_pinyin` per term; a long English text then costs one dictionary lookup
    per distinct token instead of one call per listed term.

    Example::

        >>> spellings = LatinSpellings([(term_syllables("你妈死了"), True), (term_syllables("傻逼"), False)])
        >>> spellings.find("lol nmsl and shabi")
        {0: [(4, 8)], 1: [(13, 18)]}
    """

    def __init__(self, terms: Sequence[tuple[tuple[str, ...], bool]]) -> None:
        """`terms`: (syllables, initials allowed) per term; answers name terms by their position."""
        self._by_spelling: dict[str, list[int]] = {}
        covered = []
        for position, (syllables, initials) in enumerate(terms):
            if not syllables or len(syllables) > _MAX_EXPANDED_SYLLABLES or not all(
                    s.isascii() and s.isalpha() for s in syllables):
                continue  # `find_pinyin` takes its general path for these: callers call it
            covered.append(position)
            spelled = sum(len(s) for s in syllables)
            shortest = max(3, len(syllables) if initials else spelled)
            choices = [(s, s[0]) if initials else (s,) for s in syllables]
            for spelling in {"".join(parts) for parts in itertools.product(*choices)}:
                if len(spelling) >= shortest and _match_from(spelling, 0, syllables, 0, initials) == len(spelling):
                    self._by_spelling.setdefault(spelling, []).append(position)
        #: positions of the terms `find` does not answer for (they need `find_pinyin`)
        self.uncovered = frozenset(range(len(terms))) - frozenset(covered)

    def find(self, text: str) -> dict[int, list[tuple[int, int]]]:
        """Matches in `text` (normalised, with no Han character) of the covered terms: term position ->
        spans, ascending. A common English word is never a spelling (`is_common_english`)."""
        found: dict[int, list[tuple[int, int]]] = {}
        for match in _LATIN_RUN.finditer(text):
            token = match.group()
            positions = self._by_spelling.get(token)
            if positions is None or is_common_english(token):
                continue
            for position in positions:
                found.setdefault(position, []).append((match.start(), match.end()))
        return found


def _short_latin_in_latin_text(text: str, start: int, end: int, index: StartIndex) -> bool:
    return end - start < 3 and not index.han and all(_is_latin(c) for c in text[start:end])


def _match_from(text: str, position: int, syllables: tuple[str, ...], index: int, initials: bool) -> int | None:
    if index == len(syllables):
        return position
    if position >= len(text):
        return None
    syllable = syllables[index]
    char = text[position]
    if syllable in readings(char):
        return _match_from(text, position + 1, syllables, index + 1, initials)
    if _is_latin(char):
        if text.startswith(syllable, position):
            end = _match_from(text, position + len(syllable), syllables, index + 1, initials)
            if end is not None:
                return end
        if initials and char == syllable[0]:
            return _match_from(text, position + 1, syllables, index + 1, initials)
    return None
