"""Text normalisation for blocklist matching and classification, with exact offsets back to the input.

`normalize(text)` folds the many ways of writing the same word into one form and remembers, for every
output character, which input code point it came from, so a match found in the normalised text can be
reported as a span of the text exactly as the client sent it.

Steps, in order (each output character keeps the offset of the input character it came from):

1. Per character: NFKC (full-width -> half-width, ligatures, circled and mathematical letters), case
   folding (`str.casefold`), traditional -> simplified Chinese (OpenCC `t2s`, character by character),
   Latin diacritics stripped (é -> e), combining marks and variation selectors dropped, Cyrillic/Greek
   look-alikes, negative circled/squared letters and regional indicators folded to Latin (а -> a, ο -> o,
   🅺 -> k, 🇰 -> k), format (Cf) and control (Cc) characters dropped,
   every whitespace character turned into a space. Per-character NFKC/t2s is deliberate: it keeps the
   offsets exact; phrase-level conversion would not change what a blocklist matches.
2. Whitespace runs become one space; leading and trailing spaces go.
3. Leet folding (0->o 1->i 3->e 4->a 5->s 7->t @->a $->s, and ! -> i inside a word) only inside tokens
   that contain a Latin letter, so "2024" and "微信1" keep their digits while "sh1t" becomes "shit".
   Quantities such as "2nd", "10am", "5kg" are left alone (a number followed by a unit suffix).
4. Separator folding: separators (spaces, punctuation, symbols) between two CJK characters are removed
   ("傻 . 逼" -> "傻逼"); a run of at least three single Latin letters separated by short separator runs
   is joined ("f.u.c.k", "f u c k" -> "fuck"). Apostrophes never join letters ("i'm a" stays).
5. Runs of three or more identical letters collapse to one ("fuuuuck" -> "fuck"; "cool" keeps its
   double o). Digits and punctuation runs are kept (phone numbers and prices stay intact). A side effect:
   "xxx" becomes "x".

Example::

    >>> n = normalize("ｆｕｃｋ you")
    >>> n.text
    'fuck you'
    >>> n.original_span(0, 4)
    (0, 4)
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

from services.common.text_match.scripts import CJK_RANGES, is_cjk, is_word_char

__all__ = ["NormalizedText", "normalize", "visible_chars"]

_LEET = {"0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "7": "t", "@": "a", "$": "s"}
_LEET_INTERIOR = {"!": "i"}  # only between two letters or digits: "b!tch" yes, "hello!" and "hi!!" no
_QUANTITY = re.compile(
    r"\d+(?:st|nd|rd|th|am|pm|s|k|m|h|x|p|g|kg|km|cm|mm|gb|mb|tb|ml|min|mins|hr|hrs|yr|yrs|sec|secs|d|y)")
_APOSTROPHES = frozenset("'\u2019\u02bc`")
_MAX_SPELLED_SEPARATOR = 3  # "f . u . c . k" joins, letters far apart do not
_MULTI_SPACE = re.compile(r" {2,}")
_TOKEN = re.compile(r"(?:[^\W_]|[@$!])+")
_ASCII_LETTER = re.compile(r"[a-z]")
_LEET_HINT = re.compile(r"[0-9@$!]")
_REPEAT = re.compile(r"(.)\1{2,}")
_TRIPLE = re.compile(r"(.)\1\1")
_PURE_HAN = re.compile("[\u4e00-\u9fff]+")
# Cheap tests that decide whether the slower separator pass can change anything.
_CJK_HINT = re.compile("[" + "".join(f"{chr(low)}-{chr(high)}" for low, high in CJK_RANGES) + "]")
_SPELLED_HINT = re.compile(r"(?<![^\W_])[a-z][\W_]{1,3}[a-z][\W_]{1,3}[a-z](?![^\W_])")

# Look-alikes after case folding (so only lower-case forms are needed).
_HOMOGLYPHS = str.maketrans({
    # Cyrillic
    "а": "a", "в": "b", "е": "e", "ё": "e", "к": "k", "м": "m", "н": "h", "о": "o", "р": "p",
    "с": "c", "т": "t", "у": "y", "х": "x", "ѕ": "s", "і": "i", "ї": "i", "ј": "j", "ԁ": "d",
    "ԛ": "q", "ԝ": "w", "ѵ": "v", "ӏ": "l", "һ": "h", "ү": "y", "ɡ": "g",
    # Greek
    "α": "a", "β": "b", "γ": "y", "ε": "e", "η": "n", "ι": "i", "κ": "k", "ν": "v", "ο": "o",
    "ρ": "p", "τ": "t", "υ": "u", "χ": "x", "ω": "w", "σ": "o", "ς": "s", "μ": "u",
    # Latin oddities NFKC leaves alone
    "ı": "i", "ł": "l", "ø": "o", "đ": "d", "ħ": "h", "ŧ": "t", "ß": "ss", "æ": "ae", "œ": "oe",
})
# Negative circled and negative squared Latin capitals (🅐 🅺 🆈), which NFKC leaves alone although they
# are letters written as symbols ("🅺🅸🅻🅻 🆈🅾🆄"), and regional indicators (🇦-🇿): a pair of them shows as
# a flag, but each is a letter, and "🇰🇮🇱🇱 🇾🇴🇺" spells a threat that no model would otherwise read (and
# three valid flags in a row, 🇳🇮 🇬🇬 🇪🇷, spell a slur). A real flag becomes its two-letter region code
# ("🇺🇸" -> "us"), which is what it means.
_HOMOGLYPHS.update({base + offset: chr(ord("a") + offset) for base in (0x1F150, 0x1F170, 0x1F1E6)
                    for offset in range(26)})
_COMBINING_RANGES = ((0x0300, 0x036F), (0x1AB0, 0x1AFF), (0x1DC0, 0x1DFF), (0x20D0, 0x20FF),
                     (0xFE20, 0xFE2F), (0xFE00, 0xFE0F), (0xE0100, 0xE01EF))
# Traditional -> simplified is computed once for the BMP Han blocks (a few ms with OpenCC).
_HAN_BLOCKS = ((0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF))


@dataclass(frozen=True)
class NormalizedText:
    """A normalised string plus, per character, the index of the original code point it came from.

    Example::

        >>> n = normalize("傻　.　逼")
        >>> n.text, n.original_span(0, 2), n.original_text(0, 2)
        ('傻逼', (0, 5), '傻　.　逼')
    """

    text: str
    offsets: tuple[int, ...]
    original: str
    #: per character, the end (exclusive) of its source in `original`; None = offset + 1. Set by views
    #: where one character stands for several (a recomposed 女马 -> 妈, an emoji -> 狗: zh_variants.py)
    ends: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if len(self.offsets) != len(self.text):
            raise ValueError(f"offsets: length {len(self.offsets)} != length of text {len(self.text)}")
        if self.ends is not None and len(self.ends) != len(self.text):
            raise ValueError(f"ends: length {len(self.ends)} != length of text {len(self.text)}")

    def original_span(self, start: int, end: int) -> tuple[int, int]:
        """Map the half-open span [start, end) of `text` to a half-open span of `original`.

        The result starts at the first character's source and ends just after the last character's
        source, so it includes any separators, zero-width characters or repeats folded away inside.
        """
        if not 0 <= start <= end <= len(self.text):
            raise ValueError(f"span: need 0 <= start <= end <= {len(self.text)}, got ({start}, {end})")
        if start == end:
            position = self.offsets[start] if start < len(self.offsets) else len(self.original)
            return position, position
        return self.offsets[start], (self.offsets[end - 1] + 1 if self.ends is None else self.ends[end - 1])

    def original_text(self, start: int, end: int) -> str:
        """The original surface text behind the normalised span [start, end)."""
        first, last = self.original_span(start, end)
        return self.original[first:last]


def normalize(text: str) -> NormalizedText:
    """Normalise `text` for matching (see the module docstring for the steps).

    Example::

        >>> normalize("Sh1t, f.u.c.k and 傻＊逼").text
        'shit, fuck and 傻逼'
    """
    if _PURE_HAN.fullmatch(text) and _simplified().keys().isdisjoint(text) and not _TRIPLE.search(text):
        # fast path (clause views normalise hundreds of short clauses): unified Han characters that
        # are already simplified fold to themselves and no step below changes such a text, unless a
        # character repeats three times (step 5)
        return NormalizedText(text, tuple(range(len(text))), text)
    folded, offsets = _fold_chars(text)
    folded, offsets = _collapse_spaces(folded, offsets)
    folded = _fold_leet(folded)
    folded, offsets = _fold_separators(folded, offsets)
    folded, offsets = _collapse_repeats(folded, offsets)
    return NormalizedText(folded, tuple(offsets), text)


def visible_chars(text: str) -> tuple[str, tuple[int, ...]] | None:
    """`text` without its invisible characters (format characters such as the zero-width space,
    joiner and non-joiner, word joiner and BOM; control characters other than whitespace), and per
    character kept its index in `text`; None when there are none (almost every text).

    `normalize()` drops these characters itself; matching code that also reads the text as sent
    (contact details, context words, clause punctuation, emoji) reads this instead, so a zero-width
    character between 微 and 信 or between 哈 and 哈 hides nothing there either.

    Example::

        >>> visible_chars("Q\u200bQ：1"), visible_chars("QQ")
        (('QQ：1', (0, 2, 3, 4)), None)
    """
    if text.isprintable():  # fast path: no format (Cf) or control (Cc) character at all
        return None
    kept = tuple(index for index, char in enumerate(text) if not _invisible(char))
    if len(kept) == len(text):
        return None
    return "".join(text[index] for index in kept), kept


@lru_cache(maxsize=65536)
def _invisible(char: str) -> bool:
    category = unicodedata.category(char)
    return category == "Cf" or (category == "Cc" and not char.isspace())


def _fold_chars(text: str) -> tuple[str, list[int]]:
    if text.isascii() and text.isprintable():  # fast path: only case folding can change anything
        return text.lower(), list(range(len(text)))
    pieces: list[str] = []
    offsets: list[int] = []
    for index, char in enumerate(text):
        folded = _fold_char(char)
        if folded:
            pieces.append(folded)
            offsets.extend([index] * len(folded))
    return "".join(pieces), offsets


@lru_cache(maxsize=65536)
def _fold_char(char: str) -> str:
    """Everything that depends on one character alone (step 1). Cached: texts reuse few characters."""
    if char.isspace():
        return " "
    category = unicodedata.category(char)
    if category in ("Cf", "Cc", "Cs", "Co", "Cn") or _is_combining(char):
        return ""
    out = []
    for piece in unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", char).casefold()):
        if piece.isspace():
            out.append(" ")
        elif not (unicodedata.category(piece).startswith("C") or _is_combining(piece)):
            out.append(_simplified().get(piece, piece))
    return _strip_latin_diacritics("".join(out)).translate(_HOMOGLYPHS)


def _is_combining(char: str) -> bool:
    code = ord(char)
    return any(low <= code <= high for low, high in _COMBINING_RANGES)


def _strip_latin_diacritics(text: str) -> str:
    out = []
    for char in text:
        if "\u00c0" <= char <= "\u024f" or "\u1e00" <= char <= "\u1eff":
            base = "".join(c for c in unicodedata.normalize("NFD", char) if not _is_combining(c))
            out.append(base or char)
        else:
            out.append(char)
    return "".join(out)


@lru_cache(maxsize=1)
def _simplified() -> dict[str, str]:
    """Traditional -> simplified for single Han characters; entries that are not 1:1 are left out."""
    import opencc  # imported lazily: only needed the first time a non-cached character is folded

    chars = [chr(code) for low, high in _HAN_BLOCKS for code in range(low, high + 1)]
    converted = opencc.OpenCC("t2s").convert("\n".join(chars)).split("\n")
    if len(converted) != len(chars):  # a separator was swallowed: fall back to one call per character
        converter = opencc.OpenCC("t2s")
        converted = [converter.convert(c) for c in chars]
    return {src: dst for src, dst in zip(chars, converted) if src != dst and len(dst) == 1}


def _drop(text: str, offsets: list[int], drop: set[int]) -> tuple[str, list[int]]:
    """Remove the characters at the indices in `drop` (and their offsets)."""
    if not drop:
        return text, offsets
    keep = [i for i in range(len(text)) if i not in drop]
    return "".join(text[i] for i in keep), [offsets[i] for i in keep]


def _collapse_spaces(text: str, offsets: list[int]) -> tuple[str, list[int]]:
    if "  " not in text and not text.startswith(" ") and not text.endswith(" "):
        return text, offsets
    drop = {i for m in _MULTI_SPACE.finditer(text) for i in range(m.start() + 1, m.end())}
    text, offsets = _drop(text, offsets, drop)
    start, end = (1 if text.startswith(" ") else 0), (len(text) - 1 if text.endswith(" ") and len(text) > 1 else len(text))
    return text[start:end], offsets[start:end]


def _fold_leet(text: str) -> str:
    if not _LEET_HINT.search(text):
        return text
    chars = list(text)
    for token in _TOKEN.finditer(text):
        word = token.group()
        if not _ASCII_LETTER.search(word) or not _LEET_HINT.search(word) or _QUANTITY.fullmatch(word):
            continue
        for position in range(token.start(), token.end()):
            char = text[position]
            if char in _LEET:
                chars[position] = _LEET[char]
            elif (char in _LEET_INTERIOR and token.start() < position < token.end() - 1
                  and text[position - 1].isalnum() and text[position + 1].isalnum()):
                chars[position] = _LEET_INTERIOR[char]
    return "".join(chars)


@lru_cache(maxsize=65536)
def _kind(char: str) -> str:
    """"sep" for a space, punctuation or symbol; "word" for a word character; else "other"."""
    if char == " " or unicodedata.category(char)[0] in "PS":
        return "sep"
    return "word" if is_word_char(char) else "other"


def _fold_separators(text: str, offsets: list[int]) -> tuple[str, list[int]]:
    has_cjk = _CJK_HINT.search(text) is not None
    if not has_cjk and not _SPELLED_HINT.search(text):
        return text, offsets
    drop: set[int] = set()
    runs = _runs(text)
    if has_cjk:
        for position in range(1, len(runs) - 1):
            kind, start, end = runs[position]
            if kind == "sep" and is_cjk(text[start - 1]) and is_cjk(text[end]):
                drop.update(range(start, end))
    for first, last in _spelled_out_sequences(text, runs):
        for kind, start, end in runs[first:last + 1]:
            if kind == "sep":
                drop.update(range(start, end))
    return _drop(text, offsets, drop)


def _runs(text: str) -> list[tuple[str, int, int]]:
    """Split into maximal runs of kind "sep" (separators), "word" (word chars) or "other"."""
    runs: list[tuple[str, int, int]] = []
    for index, char in enumerate(text):
        kind = _kind(char)
        if runs and runs[-1][0] == kind and kind != "other":
            runs[-1] = (kind, runs[-1][1], index + 1)
        else:
            runs.append((kind, index, index + 1))
    return runs


def _spelled_out_sequences(text: str, runs: list[tuple[str, int, int]]) -> list[tuple[int, int]]:
    """Index ranges [first, last] of runs that spell a word letter by letter: a s s, f.u.c.k."""

    def is_letter(run: tuple[str, int, int]) -> bool:
        return run[0] == "word" and run[2] - run[1] == 1 and "a" <= text[run[1]] <= "z"

    def joins(run: tuple[str, int, int]) -> bool:
        return (run[0] == "sep" and run[2] - run[1] <= _MAX_SPELLED_SEPARATOR
                and not any(text[i] in _APOSTROPHES for i in range(run[1], run[2])))

    found = []
    index = 0
    while index < len(runs):
        last = index
        while is_letter(runs[last]) and last + 2 < len(runs) and joins(runs[last + 1]) and is_letter(runs[last + 2]):
            last += 2
        if is_letter(runs[index]) and (last - index) // 2 + 1 >= 3:
            found.append((index, last))
            index = last + 1
        else:
            index += 1
    return found


def _collapse_repeats(text: str, offsets: list[int]) -> tuple[str, list[int]]:
    drop = {i for m in _REPEAT.finditer(text) if m.group(1).isalpha() for i in range(m.start() + 1, m.end())}
    return _drop(text, offsets, drop)
