"""Tests for bench/rule_contribution.py: what one source's hits add, counted against the labels."""

from __future__ import annotations

from bench.rule_contribution import DevRow, contribution
from services.common.contracts.text import LexiconHit, TextRow


def _hit(category: str, source: str) -> LexiconHit:
    return LexiconHit(category, "t", 2, 0, 1, "t", source)


def _fires(text: str, row: TextRow) -> set[str]:
    """A stand-in decision: a category fires when a hit names it or its score is at least 0.5."""
    return {h.category for h in row.matches} | {c for c, s in row.scores.items() if s >= 0.5}


def test_a_source_that_alone_fires_a_wrong_category_is_net_harmful_and_one_backed_by_a_score_is_neutral() -> None:
    rows = [DevRow("natural", "a", frozenset()), DevRow("natural", "b", frozenset({"hate"})),
            DevRow("template", "c", frozenset({"hate"}), "homophone"), DevRow("template", "d", frozenset({"hate"}))]
    scored = [TextRow({"hate": 0.1}, (_hit("hate", "rule:x"),)),
              TextRow({"hate": 0.9}, (_hit("hate", "rule:x"), _hit("hate", "rule:y"))),
              TextRow({"hate": 0.0}, (_hit("hate", "rule:y"),)),
              TextRow({"hate": 0.0}, (_hit("hate", "rule:y"), _hit("hate", "default")))]
    out = contribution(rows, scored, _fires)
    assert out["rule:x"] == {"natural_fp_removed": 1, "natural_rows": 2, "net": 1}
    assert out["rule:y"] == {"evasion_tp_lost": 1, "natural_rows": 1, "template_rows": 2, "template_tp_lost": 1,
                             "net": -1}
    assert out["default"] == {"template_rows": 1, "net": 0}


def test_a_hit_on_another_category_only_counts_for_the_category_it_takes_away() -> None:
    rows = [DevRow("natural", "a", frozenset({"spam"}))]
    scored = [TextRow({"spam": 0.9}, (_hit("harassment", "rule:z"),))]
    assert contribution(rows, scored, _fires)["rule:z"] == {"natural_fp_removed": 1, "natural_rows": 1, "net": 1}
