"""References to minors in a text: what makes sexual content `sexual/minors` (docs/taxonomy.md).

The naturalistic corpus holds no sexual content about minors and never will (the project does not write
it), so no head learns this kind. It is read instead from what the text says about someone's age: an
age under 18 written the ways people write ages ("14 year old", "15yo", "13f", "aged 12", "in 8th
grade"), and words that name a child ("kid", "child", "minor", "underage", "preteen", "middle schooler",
"jailbait", "loli"). The share of `sexual/minors` is 1 when the text has such a reference and 0 when
it has none; it counts only where the text is sexual content (the router reads it when `sexual` fires,
or scores at least its operating point: services/router/fusion.py), so "my kid's school play" or
"a 15 year old's first job" never act on their own. The span of each reference is the evidence.

Plain Python over the text as sent (case-insensitive; offsets are code points into it).

Example::

    >>> [text[a:b] for text in ["she's only 14 and so hot"] for a, b in minor_references(text)]
    ['14']
    >>> minor_references("a 25 year old woman"), minor_references("my 3 kids' school run")
    ([], [(5, 9)])
"""

from __future__ import annotations

import re

__all__ = ["MINOR_WORDS", "minor_references"]

#: Words that name a child or a minor (whole words; plurals included).
MINOR_WORDS = ("kid", "kids", "kiddo", "child", "children", "minor", "minors", "underage", "under-age", "preteen",
               "preteens", "pre-teen", "pre-teens", "toddler", "toddlers", "middle schooler", "middle schoolers",
               "grade schooler", "elementary schooler", "schoolgirl", "schoolgirls", "schoolboy", "schoolboys",
               "jailbait", "loli", "lolis", "lolicon", "shota", "shotacon", "little girl", "little girls",
               "little boy", "little boys")
_AGE = r"(?:[1-9]|1[0-7])"
_PATTERNS = (
    # "14 year old", "14-year-old", "14 yrs old", "14yo", "14 y/o", "14 years of age"
    re.compile(rf"(?<![\d.,])({_AGE})(?:\s*-?\s*(?:years?|yrs?|yr)\s*-?\s*(?:old|of age)|\s*(?:yo|y/o|y\.o\.))\b",
               re.IGNORECASE),
    # "13f", "15m", "(14F)", "f14", "M15": the age-and-sex tags of forums
    re.compile(rf"(?<![\w.])({_AGE})\s?[fm](?![\w])|(?<![\w.])[fm]\s?({_AGE})(?![\w.])", re.IGNORECASE),
    # "aged 12", "age 13", "is only 14", "she's 15", "he is 12"
    re.compile(rf"\b(?:aged?|only|just)\s+({_AGE})\b(?!\s*(?:%|minutes?|mins?|hours?|days?|weeks?|months?|am|pm|"
               rf"dollars?|bucks|times|[$£€]))", re.IGNORECASE),
    re.compile(rf"\b(?:she|he|they)(?:'s|\s+is|\s+are|\s+was)\s+(?:only\s+|just\s+)?({_AGE})\b(?![\d.,:])(?!\s*(?:%|"
               rf"minutes?|mins?|hours?|days?|weeks?|months?|am|pm|feet|ft|inches|in\b|cm|kg|lbs?|times|[$£€]))",
               re.IGNORECASE),
    # "in 8th grade", "a 7th grader", "year 9 student"
    re.compile(r"\b(?:[1-9]|1[0-2])(?:st|nd|rd|th)[\s-]+grader?s?\b", re.IGNORECASE),
    re.compile(r"\b(?:middle|junior high|elementary|primary|grade)\s+school(?:er)?s?\b", re.IGNORECASE),
    re.compile(r"\b(?:" + "|".join(re.escape(word) for word in sorted(MINOR_WORDS, key=len, reverse=True)) + r")\b",
               re.IGNORECASE),
)


def minor_references(text: str) -> list[tuple[int, int]]:
    """Half-open spans of the references to minors in `text` (an age under 18 or a word naming a child),
    sorted and without overlaps (the age itself for a written age, the words for a name). See the module
    docstring; empty when there is none."""
    spans: set[tuple[int, int]] = set()
    for pattern in _PATTERNS:
        for found in pattern.finditer(text):
            groups = [k for k in range(1, (pattern.groups or 0) + 1) if found.group(k) is not None]
            spans.add(found.span(groups[0]) if groups else found.span())
    kept: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if kept and start < kept[-1][1]:
            kept[-1] = (kept[-1][0], max(kept[-1][1], end))
        else:
            kept.append((start, end))
    return kept
