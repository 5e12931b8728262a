"""Profile routing (services/router/profiles.py): which texts balanced sends on to text_semantic."""

from __future__ import annotations

import pytest

from services.common.contracts.text import LexiconHit, TextRow
from services.router.policy import BalancedRouting
from services.router.profiles import FAST_MODEL, SEMANTIC_MODEL, escalated, first_model, needs_second_opinion

BAND = BalancedRouting(low=0.2, high=0.8, escalate_targeted=True)
ACTING = frozenset({"harassment", "hate", "spam"})


def row(target: bool = False, **scores: float) -> TextRow:
    return TextRow({"harassment": 0.0, "hate": 0.0, "spam": 0.0, "profanity": 0.0, **scores}, (), (), target)


def scored(scores: dict[str, float]) -> TextRow:
    return TextRow({"harassment": 0.0, "hate": 0.0, "spam": 0.0, "profanity": 0.0, **scores}, (), (), False)


def test_first_model_per_profile() -> None:
    assert (first_model("fast"), first_model("balanced"), first_model("accurate")) == (FAST_MODEL, FAST_MODEL, SEMANTIC_MODEL)
    assert (FAST_MODEL, SEMANTIC_MODEL) == ("text_moderation", "text_semantic")


@pytest.mark.parametrize("scores, expected", [
    ({}, False),                          # confidently benign
    ({"harassment": 0.95}, False),        # confidently harmful
    ({"harassment": 0.2}, True),          # band is half-open: low is inside
    ({"harassment": 0.8}, False),         # ... high is outside
    ({"spam": 0.5}, True),
    ({"profanity": 0.5}, False),          # uncertain, but the policy does not act on profanity
])
def test_band_on_acting_categories_only(scores: dict[str, float], expected: bool) -> None:
    assert needs_second_opinion(scored(scores), BAND, ACTING) is expected


def test_targeted_text_is_escalated_unless_the_policy_says_not_to() -> None:
    assert needs_second_opinion(row(target=True), BAND, ACTING)
    assert not needs_second_opinion(row(target=True), BalancedRouting(escalate_targeted=False), ACTING)


def test_only_balanced_escalates() -> None:
    rows = [row(), row(harassment=0.5), row(target=True), row(hate=0.99)]
    assert escalated("balanced", rows, BAND, ACTING) == [1, 2]
    assert escalated("fast", rows, BAND, ACTING) == [] == escalated("accurate", rows, BAND, ACTING)


def test_a_hit_below_the_band_top_is_escalated() -> None:
    # the hit alone would decide; text_semantic reports it only when its own score corroborates it
    hit = LexiconHit("hate", "swastika", 2, 4, 12, "swastika")
    assert needs_second_opinion(TextRow({"hate": 0.05}, (hit,), (), False), BAND, ACTING)
    assert not needs_second_opinion(TextRow({"hate": 0.9}, (hit,), (), False), BAND, ACTING)  # confident: the hit stands
    assert not needs_second_opinion(TextRow({"hate": 0.05}, (hit,), (), False), BAND, frozenset({"spam"}))
    assert not needs_second_opinion(TextRow({"hate": 0.05}, (hit,), (), False), BalancedRouting(low=0.5, high=0.5), ACTING)


def test_an_empty_band_escalates_targets_only() -> None:
    rows = [row(harassment=0.5), row(target=True)]
    assert escalated("balanced", rows, BalancedRouting(low=0.5, high=0.5), ACTING) == [1]


def test_target_floor_skips_targeted_texts_without_any_signal() -> None:
    routing = BalancedRouting(low=0.2, high=0.8, escalate_targeted=True, target_floor=0.05)
    assert not needs_second_opinion(row(target=True), routing, ACTING)
    assert needs_second_opinion(row(target=True, hate=0.06), routing, ACTING)
