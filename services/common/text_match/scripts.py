"""Which writing system a character belongs to, as far as matching cares: CJK or a word character.

CJK text has no spaces between words, so blocklist terms match as substrings there; in other scripts a
term must stand alone (a word character may not touch it), which is what `is_word_char` decides.

Example::

    >>> is_cjk("逼"), is_cjk("a"), is_word_char("a"), is_word_char("逼"), is_word_char("-")
    (True, False, True, False, False)
"""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["CJK_RANGES", "blank_han", "has_cjk", "is_cjk", "is_word_char", "latin_words"]

# Han (with extensions and compatibility ideographs), kana, Hangul, Bopomofo, CJK symbols block.
CJK_RANGES = (
    (0x2E80, 0x2FDF), (0x3005, 0x3007), (0x3021, 0x3029), (0x3040, 0x30FF), (0x3100, 0x312F),
    (0x3130, 0x318F), (0x31A0, 0x31FF), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xA960, 0xA97F),
    (0xAC00, 0xD7FF), (0xF900, 0xFAFF), (0xFF66, 0xFF9F), (0x20000, 0x323AF),
)


#: a run of letters outside the CJK blocks (Latin, Cyrillic, Greek...): one "word" for `latin_words`
_NON_CJK_LETTERS = re.compile("[^\\W\\d_" + "".join(f"\\U{low:08x}-\\U{high:08x}" for low, high in CJK_RANGES) + "]+")


def latin_words(text: str) -> int:
    """How many runs of letters outside the CJK blocks `text` holds ("我们team今天ok" -> 2).

    Example::

        >>> latin_words("打call，加油！"), latin_words("i will find you"), latin_words("666 😊")
        (1, 4, 0)
    """
    return sum(1 for _ in _NON_CJK_LETTERS.finditer(text))


@lru_cache(maxsize=65536)
def is_cjk(char: str) -> bool:
    """True for a Chinese, Japanese or Korean character (ideograph, kana, Hangul, Bopomofo)."""
    code = ord(char)
    if code < 0x2E80:
        return False
    return any(low <= code <= high for low, high in CJK_RANGES)


@lru_cache(maxsize=65536)
def is_word_char(char: str) -> bool:
    """True for a letter or digit of a space-separated script (Latin, Cyrillic, digits...), not CJK."""
    return char.isalnum() and not is_cjk(char)


def has_cjk(text: str) -> bool:
    """True when `text` has a CJK character.

    Example::

        >>> has_cjk("gg 你好"), has_cjk("hello")
        (True, False)
    """
    return any(is_cjk(c) for c in text)


def blank_han(text: str) -> str:
    """`text` with every CJK character replaced by a space (same length, so token offsets still hold):
    what the English encoders (MiniLM, its static token vectors) read of a mixed text.

    Example::

        >>> blank_han("see 你 soon")
        'see   soon'
    """
    return "".join(" " if is_cjk(c) else c for c in text)
