"""Seeded obfuscations that turn a plain corpus row into an evasion row.

Only mechanical families are generated here (separators, zero-width characters, full-width forms,
traditional script, repetition). Phonetic and structural evasions (pinyin, homophones, split
characters, emoji) are written by hand in the templates, so that a matcher built from a pinyin
library is not tested on text that the same library produced.

A template text marks the span to rewrite with square brackets; without marks the whole text is the
span. Marks are removed from the result.

Example::

    rng = random.Random(7)
    obfuscate("separators", "你就是个[废物]", rng)  # e.g. "你就是个废*物"
    strip_marks("你就是个[废物]")                    # "你就是个废物"
"""

from __future__ import annotations

import random
import re
from functools import lru_cache
from typing import Callable

__all__ = ["obfuscate", "strip_marks"]

_MARKED = re.compile(r"\[([^\[\]]*)\]")
# Separators seen in Chinese live chat and comments between the characters of a word.
_SEPARATORS = (" ", ".", "*", "-", "_", "/", "|", "、", "~", "·", "…", "#", "+", "^", "　")
_ZERO_WIDTH = ("\u200b", "\u200c", "\u200d", "\u2060", "\ufeff")
_FULL_WIDTH_OFFSET = 0xFEE0


def strip_marks(text: str) -> str:
    """The text without its obfuscation marks."""
    return text.replace("[", "").replace("]", "")


def obfuscate(family: str, marked: str, rng: random.Random) -> str | None:
    """`marked` rewritten by `family`, marks removed; None when the family changes nothing.

    Raises ValueError for a family this module does not generate.
    """
    try:
        rewrite = _SPAN_REWRITES[family]
    except KeyError:
        if family == "full_width":
            result = _full_width(strip_marks(marked))
        elif family == "traditional":
            result = _traditional(strip_marks(marked))
        else:
            raise ValueError(f"obfuscation family {family!r} is not generated") from None
    else:
        if _MARKED.search(marked):
            result = _MARKED.sub(lambda m: rewrite(m.group(1), rng), marked)
        else:
            result = rewrite(marked, rng)
    return None if result == strip_marks(marked) else result


def _separated(span: str, rng: random.Random) -> str:
    separator = rng.choice(_SEPARATORS)
    # Doubling a space separator is common ("傻  逼"); other separators are written once.
    return separator.join(span) if separator != " " or rng.random() < 0.7 else "  ".join(span)


def _zero_width(span: str, rng: random.Random) -> str:
    out = [span[0]] if span else []
    for char in span[1:]:
        out.append(rng.choice(_ZERO_WIDTH))
        out.append(char)
    return "".join(out)


def _repeated(span: str, rng: random.Random) -> str:
    if not span:
        return span
    if rng.random() < 0.4:
        # The whole span said again ("废物废物废物"), as in danmaku floods.
        return span * rng.randint(2, 3)
    # One character stuttered ("傻逼逼逼", "sbbbb"): the last one more often, as people type it.
    index = len(span) - 1 if rng.random() < 0.6 else rng.randrange(len(span))
    return span[:index] + span[index] * rng.randint(2, 5) + span[index + 1:]


def _full_width(text: str) -> str:
    out = []
    for char in text:
        code = ord(char)
        if 0x21 <= code <= 0x7E:
            out.append(chr(code + _FULL_WIDTH_OFFSET))
        elif char == " ":
            out.append("\u3000")
        else:
            out.append(char)
    return "".join(out)


@lru_cache(maxsize=1)
def _s2t() -> Callable[[str], str]:
    import opencc  # imported lazily: only the traditional family needs it

    converter = opencc.OpenCC("s2t")
    convert: Callable[[str], str] = converter.convert
    return convert


def _traditional(text: str) -> str:
    return _s2t()(text)


_SPAN_REWRITES: dict[str, Callable[[str, random.Random], str]] = {
    "separators": _separated,
    "zero_width": _zero_width,
    "repetition": _repeated,
}
