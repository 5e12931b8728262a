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

from functools import lru_cache

from pypinyin import Style, lazy_pinyin, pinyin

__all__ = ["StartIndex", "find_pinyin", "readings", "term_syllables"]


def term_syllables(term: str) -> tuple[str, ...]:
    """The toneless syllables of a Chinese term (phrase-aware: pypinyin's phrase dictionary)."""
    return tuple(s.lower() for s in lazy_pinyin(term, style=Style.NORMAL, errors="default"))


@lru_cache(maxsize=65536)
def readings(char: str) -> frozenset[str]:
    """Every toneless reading of one Han character; empty for anything else."""
    if not ("\u3400" <= char <= "\u9fff" or "\uf900" <= char <= "\ufaff"):
        return frozenset()
    result = pinyin(char, style=Style.NORMAL, heteronym=True, errors="ignore")
    return frozenset(r.lower() for group in result for r in group if r.isascii() and r.isalpha())


def _is_latin(char: str) -> bool:
    return "a" <= char <= "z"


class StartIndex:
    """Where a match can start in one text: Han characters by reading, Latin word starts by letter.

    Built once per text, so each listed term only tries the few positions its first syllable can
    start at (a long Latin-only text has none for most terms) instead of every position."""

    def __init__(self, text: str) -> None:
        self.han: dict[str, list[int]] = {}
        self.latin: dict[str, list[int]] = {}
        for position, char in enumerate(text):
            if _is_latin(char):
                if position == 0 or not _is_latin(text[position - 1]):
                    self.latin.setdefault(char, []).append(position)
            else:
                for reading in readings(char):
                    self.han.setdefault(reading, []).append(position)

    def starts(self, syllable: str) -> list[int]:
        """Candidate start positions for a match whose first syllable is `syllable`, ascending."""
        return sorted({*self.han.get(syllable, ()), *self.latin.get(syllable[:1], ())})


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
    first = syllables[0]
    for start in index.starts(first):
        if not initials and _is_latin(text[start]) and not text.startswith(first, start):
            continue  # cheap pre-check: a Latin start must spell the whole first syllable (long English texts)
        end = _match_from(text, start, syllables, 0, initials)
        if end is not None and not (end < len(text) and _is_latin(text[end - 1]) and _is_latin(text[end])) \
                and not _short_latin_in_latin_text(text, start, end, index):
            found.append((start, end))
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
