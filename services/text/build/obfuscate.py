"""Seeded obfuscation transforms that turn a word (or a whole text) into how evaders write it.

Each transform takes the text to disguise and a seeded `random.Random`, and always changes it (a
transform that could return its input would add a duplicate row rather than an evasion). They model
what users type to slip past word lists: leetspeak, spaced letters, words run together, look-alike
letters from other scripts, symbol masks and stretched letters.

Example::

    TRANSFORMS["spacing"]("idiot", random.Random(1))  # 'i d i o t'
"""

from __future__ import annotations

import random
from typing import Callable

__all__ = ["TRANSFORMS", "Transform"]

Transform = Callable[[str, random.Random], str]

_LEET = {"a": "4", "e": "3", "i": "1", "o": "0", "s": "5", "t": "7"}
# Cyrillic and Greek letters that render like Latin ones (the confusables users paste in).
_HOMOGLYPHS = {"a": "а", "c": "с", "e": "е", "o": "о", "p": "р", "x": "х", "y": "у", "i": "і", "s": "ѕ",
               "j": "ј", "h": "һ", "k": "κ", "v": "ν", "A": "А", "B": "В", "E": "Е", "H": "Н", "K": "К",
               "M": "М", "O": "О", "P": "Р", "T": "Т", "X": "Х", "Y": "Υ"}
_MASKS = {"a": "@", "i": "!", "s": "$", "o": "0"}
_VOWELS = "aeiouy"


def _substitute(text: str, table: dict[str, str], rng: random.Random, share: float) -> str:
    positions = [i for i, ch in enumerate(text) if ch in table]
    if not positions:
        return text
    chosen = {i for i in positions if rng.random() < share} or {rng.choice(positions)}
    return "".join(table[ch] if i in chosen else ch for i, ch in enumerate(text))


def leet(text: str, rng: random.Random) -> str:
    """Digits for letters: idiot -> 1d10t (each mappable letter with probability 0.7, at least one)."""
    lowered = text.lower()
    out = _substitute(lowered, _LEET, rng, 0.7)
    return out if out != lowered else out + "!!"


def spacing(text: str, rng: random.Random) -> str:
    """Letters apart: idiot -> i d i o t (sometimes dots or dashes)."""
    separator = rng.choice((" ", " ", " ", ".", "-", "_"))
    return " ".join(separator.join(word) for word in text.split())


def concat(text: str, rng: random.Random) -> str:
    """Words run together: you are an idiot -> youareanidiot (lower-cased half the time)."""
    joined = "".join(text.split())
    joined = joined.lower() if rng.random() < 0.5 else joined
    return joined if joined != text else joined + joined[-1]


def homoglyph(text: str, rng: random.Random) -> str:
    """Look-alike Cyrillic/Greek letters: idiot -> іdіоt (half the mappable letters, at least one)."""
    out = _substitute(text, _HOMOGLYPHS, rng, 0.5)
    return out if out != text else out + "\u200b"


def symbol_mask(text: str, rng: random.Random) -> str:
    """One or two inner letters masked: fuck -> f*ck, bitch -> b!tch, idiot -> id!ot."""
    words = text.split()
    index = max(range(len(words)), key=lambda i: len(words[i]))
    word = words[index]
    inner = [i for i in range(1, len(word) - 1) if word[i].isalpha()] or [len(word) - 1]
    vowels = [i for i in inner if word[i].lower() in _VOWELS] or inner
    count = 2 if len(word) >= 7 and len(vowels) >= 2 and rng.random() < 0.4 else 1
    chars = list(word)
    for i in rng.sample(vowels, count):
        chars[i] = _MASKS.get(chars[i].lower(), "*") if rng.random() < 0.5 else "*"
    words[index] = "".join(chars)
    return " ".join(words)


def repeat(text: str, rng: random.Random) -> str:
    """A stretched letter: idiot -> idiooooot, loser -> loserrrr."""
    letters = [i for i, ch in enumerate(text) if ch.isalpha()]
    if not letters:
        return text + text[-1:] * 3
    vowels = [i for i in letters if text[i].lower() in _VOWELS]
    i = rng.choice(vowels) if vowels and rng.random() < 0.7 else letters[-1]
    return text[:i] + text[i] * rng.randint(3, 6) + text[i + 1:]


#: The transforms a template file's `derive.transform` may name.
TRANSFORMS: dict[str, Transform] = {
    "leet": leet, "spacing": spacing, "concat": concat, "homoglyph": homoglyph,
    "symbol_mask": symbol_mask, "repeat": repeat,
}
