"""Chinese word boundaries for the blocklist: does a hit cut through a segmented word?

CJK text has no spaces, so a listed string can straddle two ordinary words (手机|巴士 holds 机巴,
今日|批改 holds 日批, 体操|你 holds 操你). The normalised text is segmented with rjieba (the jieba-rs
dictionary inside the wheel; lexicon terms are deliberately NOT added to it, which would create false
cuts), and a hit that starts or ends strictly inside a word is a straddle.

Example::

    >>> cuts_word(word_spans("手机巴士这个网站"), 1, 3)
    True
    >>> cuts_word(word_spans("你个傻逼"), 2, 4)
    False
"""

from __future__ import annotations

import bisect
from functools import lru_cache

import rjieba

__all__ = ["cuts_word", "word_spans"]


@lru_cache(maxsize=1)
def _segmenter() -> rjieba.Jieba:
    return rjieba.Jieba()


def word_spans(text: str) -> list[tuple[int, int]]:
    """Half-open code-point spans of the words rjieba cuts `text` into (the spans tile the text)."""
    spans: list[tuple[int, int]] = []
    position = 0
    for word in _segmenter().cut(text, False):
        spans.append((position, position + len(word)))
        position += len(word)
    return spans


def cuts_word(spans: list[tuple[int, int]], start: int, end: int) -> bool:
    """True when [start, end) begins or ends strictly inside one of `spans` (a multi-character word).

    `spans` tile the text in order (as `word_spans` returns them), so each offset's word is found by
    binary search: a long text with many hits costs O(hits log words), not O(hits x words)."""
    return _inside(spans, start) or _inside(spans, end)


def _inside(spans: list[tuple[int, int]], offset: int) -> bool:
    index = bisect.bisect_right(spans, offset, key=lambda span: span[0]) - 1
    return index >= 0 and spans[index][0] < offset < spans[index][1]
