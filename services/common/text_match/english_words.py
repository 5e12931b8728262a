"""Common English words, so the pinyin space does not read English as pinyin.

"made" spells 妈的 (ma de) and "mad" could spell a syllable pair too: in a text without Han
characters, a whole Latin token that is one of the `COMMON_WORDS` most frequent English words is
English, never the pinyin of a listed Chinese term. Pinyin that users type to dodge a filter
(tamade, shabi, nmsl, zisha) is not an English word and still matches.

The list is wordninja's English Wikipedia unigram list (MIT, shipped in the wordninja wheel, sorted
by frequency); only its first `COMMON_WORDS` lines are read, once.

Example::

    >>> is_common_english("made"), is_common_english("tamade"), is_common_english("shabi")
    (True, False, False)
"""

from __future__ import annotations

import gzip
from functools import lru_cache
from pathlib import Path

__all__ = ["COMMON_WORDS", "is_common_english"]

#: How many of the most frequent English words count as common ("sb", rank ~22,700, stays pinyin).
COMMON_WORDS = 10_000


@lru_cache(maxsize=1)
def _common_words() -> frozenset[str]:
    import wordninja  # the word list sits beside its module (wordninja/wordninja_words.txt.gz)

    path = Path(wordninja.__file__).resolve().parent / "wordninja" / "wordninja_words.txt.gz"
    words: list[str] = []
    with gzip.open(path, "rt", encoding="utf-8") as stream:
        for line in stream:
            words.append(line.strip())
            if len(words) >= COMMON_WORDS:
                break
    return frozenset(words)


def is_common_english(token: str) -> bool:
    """Whether lower-case `token` is one of the `COMMON_WORDS` most frequent English words."""
    return token in _common_words()
