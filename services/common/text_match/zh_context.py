"""Context for ambiguous Chinese insults: is someone addressed?

废物, 垃圾 and 猪头 are ordinary words about things (这部电影真垃圾); entries flagged `needs_target`
count only when the text addresses a person: the second person (你, 您, 你丫) or the ways chat and
comment threads point at someone (楼上, 楼主, 主播, up主, 三楼...). The addressee list is data
(data/zh_addressees.json).

Example::

    >>> addressed("你就是个废物"), addressed("这部电影真垃圾")
    (True, False)
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

__all__ = ["ADDRESSEES_PATH", "addressed"]

ADDRESSEES_PATH = Path(__file__).resolve().parent / "data" / "zh_addressees.json"


@lru_cache(maxsize=1)
def _pattern() -> re.Pattern[str]:
    document = json.loads(ADDRESSEES_PATH.read_text(encoding="utf-8"))
    words = document.get("addressees")
    if not isinstance(words, list) or not words or not all(isinstance(w, str) and w for w in words):
        raise ValueError(f"addressees: {ADDRESSEES_PATH} must hold a non-empty list of strings")
    return re.compile("|".join(re.escape(w) for w in sorted(words, key=len, reverse=True)))


def addressed(normalised: str) -> bool:
    """True when the (normalised) text addresses a person."""
    return _pattern().search(normalised) is not None
