"""Accuracy profiles: which text model judges which text. Pure; the router and bench/quality.py both
use these functions, so the benchmark measures exactly the routing the router does.

* `fast`: every text through `text_moderation` (lexicon + context rules + linear heads, ~0.1 ms).
* `accurate`: every text through `text_semantic` (the same plus MiniLM-L6 embedding heads, ~4-8 ms).
* `balanced`: every text through `text_moderation` first; a text then also goes through
  `text_semantic` (whose answer replaces the first) when `needs_second_opinion` says the first answer
  is not enough: a score in a category the policy acts on inside the uncertainty band, a lexicon or
  rule hit in such a category whose score is below the band's top (the hit alone would decide, and
  `text_semantic` reports a hit only when its own score corroborates it), or (when the policy
  escalates targeted texts) a text that addresses a person or names a protected group.

Example::

    >>> from services.common.contracts.text import TextRow
    >>> from services.router.policy import BalancedRouting
    >>> row = TextRow({"harassment": 0.45, "spam": 0.01}, (), (), target=False)
    >>> needs_second_opinion(row, BalancedRouting(low=0.2, high=0.8), frozenset({"harassment"}))
    True
    >>> first_model("accurate")
    'text_semantic'
"""

from __future__ import annotations

from typing import AbstractSet, Sequence

from services.common.contracts.text import MODEL_NAME, SEMANTIC_MODEL_NAME, TextRow
from services.router.policy import BalancedRouting, Profile

__all__ = ["FAST_MODEL", "SEMANTIC_MODEL", "escalated", "first_model", "needs_second_opinion"]

FAST_MODEL = MODEL_NAME
SEMANTIC_MODEL = SEMANTIC_MODEL_NAME


def first_model(profile: Profile) -> str:
    """The model every text of `profile` goes through first (the only one, except for balanced)."""
    return SEMANTIC_MODEL if profile == "accurate" else FAST_MODEL


def needs_second_opinion(row: TextRow, routing: BalancedRouting, acting: AbstractSet[str]) -> bool:
    """Balanced: True when the fast model's `row` is not enough (see the module docstring).

    `acting` are the categories whose score can change the policy's decision; an uncertain score in a
    category the policy ignores costs no semantic call.
    """
    scores = [score for category, score in row.scores.items() if category in acting]
    if routing.escalate_targeted and row.target and max(scores, default=0.0) >= routing.target_floor:
        return True
    if routing.low < routing.high and any(hit.category in acting and row.scores.get(hit.category, 0.0) < routing.high
                                          for hit in row.matches):
        return True  # an empty band (low == high) escalates nothing by score or hit
    return any(routing.low <= score < routing.high for score in scores)


def escalated(profile: Profile, rows: Sequence[TextRow], routing: BalancedRouting, acting: AbstractSet[str]) -> list[int]:
    """Indexes of the `rows` (the first model's answers) that go on to `text_semantic`: none unless balanced."""
    if profile != "balanced":
        return []
    return [index for index, row in enumerate(rows) if needs_second_opinion(row, routing, acting)]
