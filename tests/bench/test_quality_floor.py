"""The quality floor (bench/quality_floor.py): the models and rules as committed decide the dev split and
the held-out probe sets no worse than the committed baseline, beyond the stated margins."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bench.quality_floor import BASELINE, MARGINS, compare, measure

# Slow (the dev split through the fast profile and the probes through fast and accurate, ~40 s): `make test` runs it, `make test-fast` skips it.
pytestmark = pytest.mark.slow


def test_dev_and_held_out_probes_hold_the_committed_baseline() -> None:
    baseline: dict[str, Any] = json.loads(BASELINE.read_text(encoding="utf-8"))
    worse = compare(baseline, measure())
    assert not worse, "quality fell below the committed floor (bench/quality_floor.py says how to update it " \
                      "when intended):\n" + "\n".join(worse)


def test_compare_flags_only_drops_beyond_the_margin() -> None:
    baseline = {"dev": {"fast": {"en": {"macro_f1": 0.80, "hard_negative_fpr": 0.10}}},
                "probes": {"fast": {"en_h": {"harmful_flagged": 0.9, "benign_flagged": None}}}}
    within = {"dev": {"fast": {"en": {"macro_f1": 0.80 - MARGINS["macro_f1"], "hard_negative_fpr": 0.105}}},
              "probes": {"fast": {"en_h": {"harmful_flagged": 0.95, "benign_flagged": 0.5}}}}
    assert compare(baseline, within) == []
    beyond = {"dev": {"fast": {"en": {"macro_f1": 0.78, "hard_negative_fpr": 0.12}}},
              "probes": {"fast": {}}}
    assert compare(baseline, beyond) == [
        "dev/fast/en/macro_f1: 0.78 against baseline 0.8 (margin 0.01)",
        "dev/fast/en/hard_negative_fpr: 0.12 against baseline 0.1 (margin 0.01)",
        "probes/fast/en_h/harmful_flagged: missing (baseline 0.9)"]
