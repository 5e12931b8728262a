"""bench/balanced_band.py's choice of the balanced band: the cheapest routing within both budgets."""

from __future__ import annotations

from typing import Any

from bench.balanced_band import HIGHS, candidates, choose


def _entry(share: float, f1: float, fpr: float) -> dict[str, Any]:
    return {"escalated_share": share, "macro_f1": f1, "hard_negative_fpr": fpr}


FRONTIER = [_entry(0.17, 0.84, 0.26), _entry(0.32, 0.87, 0.19), _entry(0.54, 0.88, 0.13), _entry(0.70, 0.89, 0.12)]


def test_the_f1_budget_alone_takes_the_cheapest_band_within_it() -> None:
    assert choose(FRONTIER, 0.895, 0.12, 0.03, None) is FRONTIER[1]


def test_an_fpr_budget_rules_out_bands_that_let_the_fast_models_false_positives_through() -> None:
    assert choose(FRONTIER, 0.895, 0.12, 0.03, 0.02) is FRONTIER[2]


def test_no_band_within_the_budgets_gives_none() -> None:
    assert choose(FRONTIER, 0.895, 0.12, 0.001, None) is None
    assert choose(FRONTIER, 0.895, 0.12, 0.03, -0.01) is None


def test_equal_cost_prefers_the_better_f1() -> None:
    better = _entry(0.32, 0.875, 0.19)
    assert choose([FRONTIER[1], better], 0.895, 0.12, 0.03, None) is better


def test_the_grid_includes_a_band_where_the_fast_model_alone_never_flags() -> None:
    assert 1.0 in HIGHS
    assert any(c.high == 1.0 and not c.escalate_targeted for c in candidates())
