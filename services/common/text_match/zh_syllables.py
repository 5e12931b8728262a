"""Latin syllables inside Chinese text, read back as the characters the phrase rules spell.

Evaders type one or two characters of a phrase in pinyin (he南人都shi骗子 for 河南人都是骗子, 我zhi道你住哪
for 我知道你住哪). The lexicon finds its own terms spelled so (zh_pinyin.py), but the phrase rules
(zh_rules.py) read characters. This module restores such a syllable to a character when its
neighbours say which one: a Latin token glued to Han text becomes the character whose reading it
spells AND which, with the Han character just before and/or after the token, forms a string that
occurs in the rules' own literals or in the texts each rule is documented to fire on (the strings
`zh_rules.Rule.needs` lists and `Rule.hits`: 河南, 人都是, 知道, 是你...). Where two characters fit
equally well, nothing is restored.

The restored text is only a view for matching: the rules must still match the whole frame, and
every boundary, target and context check applies as for the text as written. Ordinary Chinese
chat with a Latin word (我们team, 打call) is untouched: "team" and "call" are not syllables; only a
token glued to a Han character is read (a space-separated one is a word of its own).

Example::

    >>> from services.common.text_match.normalize import normalize
    >>> from services.common.text_match.zh_rules import load_rules
    >>> SyllableReader(load_rules()).view(normalize("he南人都shi骗子")).text
    '河南人都是骗子'
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Sequence

from services.common.text_match.normalize import NormalizedText
from services.common.text_match.zh_pinyin import readings
from services.common.text_match.zh_rules import Rule
from services.common.text_match.zh_variants import splice

__all__ = ["MAX_SYLLABLES", "SyllableReader"]

#: the longest Latin token restored, in syllables (one or two characters typed in pinyin)
MAX_SYLLABLES = 2
_HAN = re.compile(r"[\u4e00-\u9fff]")
_TOKEN = re.compile(r"[a-z]+")
_ALL_HAN = re.compile(r"[\u4e00-\u9fff]+")
#: the (up to two) Han characters right before / after a token
_HAN_BEFORE = re.compile(r"[\u4e00-\u9fff]{1,2}$")
_HAN_AFTER = re.compile(r"[\u4e00-\u9fff]{1,2}")


class _Vocabulary:
    """The rules' literal strings as what restoration needs: their Han n-grams, and per syllable the
    characters of those literals that read so."""

    def __init__(self, literals: set[str]) -> None:
        ngrams: set[str] = set()
        add = ngrams.add
        for literal in literals:
            for i in range(len(literal) - 1):
                add(literal[i:i + 2])
                add(literal[i:i + 3])  # at the end, the same bigram again
        self.ngrams = ngrams
        self.by_syllable: dict[str, set[str]] = defaultdict(set)
        #: per character, the characters that follow / precede it in some literal (to prune candidates)
        self.follows: dict[str, set[str]] = defaultdict(set)
        self.precedes: dict[str, set[str]] = defaultdict(set)
        for gram in ngrams:
            if len(gram) == 2:
                self.follows[gram[0]].add(gram[1])
                self.precedes[gram[1]].add(gram[0])
        for char in {c for gram in ngrams for c in gram}:
            for reading in readings(char):
                self.by_syllable[reading].add(char)


def _spellings(token: str, by_syllable: dict[str, set[str]], limit: int) -> list[list[set[str]]]:
    """Every way to cut `token` into at most `limit` syllables that rule characters read, as the
    candidate characters per syllable."""
    if not token:
        return [[]]
    if limit == 0:
        return []
    found: list[list[set[str]]] = []
    for end in range(1, min(len(token), 6) + 1):
        head = by_syllable.get(token[:end])
        if head:
            found.extend([head, *rest] for rest in _spellings(token[end:], by_syllable, limit - 1))
    return found


def _support(candidate: str, before: str, after: str, ngrams: set[str]) -> int:
    """How well `candidate` joins the Han characters around it (`before`, `after`: up to two each) into
    the rules' literals: each window through it and a neighbour that is a literal n-gram counts, one
    of three characters (two neighbours of a single character) twice."""
    windows = []
    if before:
        windows.append((before[-1] + candidate, 1))
    if after:
        windows.append((candidate + after[0], 1))
    if len(candidate) == 1:
        if len(before) == 2:
            windows.append((before + candidate, 2))
        if before and after:
            windows.append((before[-1] + candidate + after[0], 2))
        if len(after) == 2:
            windows.append((candidate + after, 2))
    return sum(weight for window, weight in windows if window in ngrams)


def _restore(token: str, before: str, after: str, vocabulary: _Vocabulary) -> str | None:
    best: dict[str, int] = {}
    for spelling in _spellings(token, vocabulary.by_syllable, MAX_SYLLABLES):
        for chars in _joined(spelling, before[-1:], after[:1], vocabulary):
            support = _support(chars, before, after, vocabulary.ngrams)
            if support:
                best[chars] = max(best.get(chars, 0), support)
    if not best:
        return None
    top = max(best.values())
    winners = [chars for chars, support in best.items() if support == top]
    return winners[0] if len(winners) == 1 else None


def _joined(spelling: list[set[str]], before: str, after: str, vocabulary: _Vocabulary) -> list[str]:
    """The strings `spelling` may stand for that join a neighbour (or, for two characters, each other)
    in some literal: set intersections, so a syllable read by dozens of characters costs little."""
    if len(spelling) == 1:
        near = (vocabulary.follows.get(before, set()) if before else set()) | (
            vocabulary.precedes.get(after, set()) if after else set())
        return sorted(spelling[0] & near)
    first, second = spelling
    return sorted(c1 + c2 for c1 in first for c2 in second & vocabulary.follows.get(c1, set()))


class SyllableReader:
    """Restores Latin syllables for one set of phrase rules (see the module docstring). Built once per
    lexicon (about half a second for the default rules: their literals' n-grams), then read-only."""

    def __init__(self, rules: Sequence[Rule]) -> None:
        literals: set[str] = set()
        for rule in rules:
            for group in (*rule.needs, *rule.requires_needs):
                literals.update(s for s in group if len(s) >= 2 and _ALL_HAN.fullmatch(s))
            for example in rule.hits:  # whole frames: the joins between a rule's literals (人|都是)
                literals.update(run for run in _ALL_HAN.findall(example) if len(run) >= 2)
        self._vocabulary = _Vocabulary(literals)

    def restore(self, text: str) -> list[tuple[int, int, str]]:
        """The Latin tokens of normalised `text` read back as rule characters: (start, end, characters),
        ascending; empty when there is nothing to restore.

        Example::

            >>> from services.common.text_match.zh_rules import load_rules
            >>> SyllableReader(load_rules()).restore("he南人都shi骗子")
            [(0, 2, '河'), (5, 8, '是')]
        """
        if not _HAN.search(text) or not _TOKEN.search(text):
            return []
        restored = []
        seen: dict[tuple[str, str, str], str | None] = {}  # a text that repeats a token pays for it once
        for match in _TOKEN.finditer(text):
            start, end = match.span()
            before = _HAN_BEFORE.search(text, max(0, start - 2), start)
            after = _HAN_AFTER.match(text, end)
            if before or after:
                key = (match.group(), before.group() if before else "", after.group() if after else "")
                if key not in seen:
                    seen[key] = _restore(*key, self._vocabulary)
                chars = seen[key]
                if chars is not None:
                    restored.append((start, end, chars))
        return restored

    def view(self, text: NormalizedText) -> NormalizedText | None:
        """`text` with its restorable tokens replaced (each restored character points at its whole
        token in the original), or None when nothing is restored."""
        restored = self.restore(text.text)
        if not restored:
            return None
        ends = [o + 1 for o in text.offsets] if text.ends is None else list(text.ends)
        chars, starts, new_ends = splice(list(text.text), list(text.offsets), ends, restored)
        return NormalizedText("".join(chars), tuple(starts), text.original, tuple(new_ends))
