"""Seeded, reproducible obfuscation of text, to measure robustness to evasion tricks.

Each word, independently with the given probabilities: leet substitution (o->0, i->1, e->3, a->4,
s->$), letters joined by dots ("f.u.c.k"), full-width forms, or zero-width spaces between letters.
The mix is a stress test, not a model of real traffic.

Example::

    >>> obfuscate_all(["you are an idiot"], seed=1)
    ['y0u are an i.d.i.o.t']
"""

from __future__ import annotations

import random
from typing import Sequence

__all__ = ["obfuscate_all"]

_LEET = str.maketrans({"o": "0", "i": "1", "e": "3", "a": "4", "s": "$"})
_ZERO_WIDTH_SPACE = "\u200b"


def _full_width(word: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in word)


def _obfuscate_word(word: str, rng: random.Random) -> str:
    draw = rng.random()
    if draw < 0.2:
        return word.translate(_LEET)
    if draw < 0.3:
        return ".".join(word)
    if draw < 0.4:
        return _full_width(word)
    if draw < 0.5:
        return _ZERO_WIDTH_SPACE.join(word)
    return word


def obfuscate_all(texts: Sequence[str], *, seed: int = 0) -> list[str]:
    """Obfuscate every text with one random generator seeded by `seed` (same input -> same output)."""
    rng = random.Random(seed)
    return [" ".join(_obfuscate_word(w, rng) for w in text.split(" ")) for text in texts]
