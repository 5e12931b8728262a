"""Evidence spans: which words drove each category's score (the EVIDENCE output of contract v3).

For every category whose score reaches `EVIDENCE_MIN`, in order of preference:

1. the hits of that category that count (a context rule's match, `source: rule:<id>`, or a lexicon
   term, `source: lexicon:<list>`);
2. a span the model found: the semantic model's strongest run of tokens (exact per-token
   contributions of the linear head over the mean-pooled embedding, `head:tokens`), or the fast
   model's highest-scoring sentence (`head:sentence`);
3. the whole text (`head:text`) when the model cannot point closer.

Offsets are half-open code points into the text as sent.

Example::

    spans = category_evidence("harassment", 0.93, hits, fallback=(0, 16, "head:sentence"))
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from services.common.contracts.text import EvidenceSpan, LexiconHit
from services.common.text_match.normalize import NormalizedText

__all__ = ["EVIDENCE_MIN", "category_evidence", "token_span"]

EVIDENCE_MIN = 0.5
_RUN_FRACTION = 0.35  # neighbours whose contribution is at least this share of the strongest join its run


def category_evidence(category: str, score: float, hits: Sequence[LexiconHit],
                      fallback: tuple[int, int, str] | None, text_length: int) -> list[EvidenceSpan]:
    """The spans for one category (empty below EVIDENCE_MIN)."""
    if score < EVIDENCE_MIN:
        return []
    own = [h for h in hits if h.category == category]
    if own:
        return [EvidenceSpan(category, h.start, h.end, score, h.source if h.source.startswith("rule:")
                             else f"lexicon:{h.term}") for h in own]
    if fallback is not None and fallback[1] > fallback[0]:
        return [EvidenceSpan(category, fallback[0], fallback[1], score, fallback[2])]
    return [EvidenceSpan(category, 0, text_length, score, "head:text")]


def token_span(contributions: np.ndarray, offsets: Sequence[tuple[int, int]],
               seen: NormalizedText) -> tuple[int, int] | None:
    """The original-text span of the strongest contiguous run of positive token contributions.

    `offsets` are the tokenizer's character spans into `seen.text` ((0, 0) for special tokens).
    """
    usable = [i for i, (a, b) in enumerate(offsets) if b > a and i < len(contributions)]
    if not usable:
        return None
    best = max(usable, key=lambda i: float(contributions[i]))
    peak = float(contributions[best])
    if peak <= 0:
        return None
    first = last = best
    while first - 1 in usable and contributions[first - 1] >= _RUN_FRACTION * peak:
        first -= 1
    while last + 1 in usable and contributions[last + 1] >= _RUN_FRACTION * peak:
        last += 1
    start, end = offsets[first][0], offsets[last][1]
    start, end = _word_bounds(seen.text, start, end)
    return seen.original_span(start, end)


def _word_bounds(text: str, start: int, end: int) -> tuple[int, int]:
    """Widen to whole words (a WordPiece "##" token covers part of one)."""
    while start > 0 and text[start - 1].isalnum():
        start -= 1
    while end < len(text) and text[end].isalnum():
        end += 1
    return start, end
