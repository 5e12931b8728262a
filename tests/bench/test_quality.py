"""bench/quality.py's plumbing with a fake text model: profiles route like the router, decisions come
from the router's evaluate under the shipped default policy, the report and targets are filled in."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

import numpy as np

from bench.corpus import CorpusRow
from bench.quality import fired_categories, profile_rows, quality, targets
from bench.text_models import Scored, score
from services.common.contracts import text as contract
from services.router.profiles import FAST_MODEL, SEMANTIC_MODEL
from tests.stubs import policy_from_file

POLICY = policy_from_file(Path(__file__).resolve().parents[2] / "config" / "policies" / "default.yaml")


class FakeModel:
    """Scores `violence` from the text: 'threat' -> 0.5 (fast, uncertain) or 0.95 (semantic)."""

    max_batch_size = 2

    def __init__(self, sure: float) -> None:
        self.sure = sure
        self.calls = 0

    def infer(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        texts = [bytes(t[0]).decode() for t in inputs["TEXT"]]
        self.calls += 1
        n = len(texts)
        out = {name: np.array([[self.sure if category == "violence" and "threat" in t else 0.01] for t in texts],
                              np.float32) for name, category in contract.SCORE_OUTPUTS.items()}
        out[contract.MATCHES] = np.array([[b"[]"]] * n, object)
        out[contract.EVIDENCE] = np.array([[b"[]"]] * n, object)
        out[contract.TARGET] = np.zeros((n, 1), np.float32)
        out.update({name: np.zeros((n, 1), np.float32) for name in contract.SUBCATEGORY_OUTPUTS})
        return out


TEXTS = ["a threat here", "nice weather", "another threat", "hello"]


def test_score_batches_by_the_models_max_batch_size() -> None:
    model = FakeModel(0.5)
    scored = score(model, TEXTS)
    assert model.calls == 2 and len(scored.rows) == 4 and scored.rows[0].scores["violence"] == 0.5


def test_balanced_escalates_only_uncertain_rows_and_takes_the_semantic_answer() -> None:
    models = {FAST_MODEL: FakeModel(0.5), SEMANTIC_MODEL: FakeModel(0.95)}
    fast = score(models[FAST_MODEL], TEXTS)
    rows, _, escalations = profile_rows("balanced", TEXTS, models, POLICY, fast)
    assert escalations == 2 and [round(r.scores["violence"], 2) for r in rows] == [0.95, 0.01, 0.95, 0.01]
    same, _, none = profile_rows("fast", TEXTS, models, POLICY, fast)
    assert none == 0 and same == fast.rows


def test_a_category_fires_when_the_policy_reviews_or_blocks_it() -> None:
    fast = score(FakeModel(0.5), TEXTS)
    assert fired_categories(POLICY, TEXTS[0], fast.rows[0]) == ("violence",)   # 0.5 = review
    assert fired_categories(POLICY, TEXTS[1], fast.rows[1]) == ()


def test_quality_report_and_targets() -> None:
    rows = [CorpusRow(f"en-f-t{i}-0", "en", t, ("violence",) if "threat" in t else (), "f", f"t{i}", "test",
                      "threat" not in t, None, "test rows", "Apache-2.0") for i, t in enumerate(TEXTS)]
    report = quality(rows, [("violence",), (), (), ()], resamples=20)
    assert report["categories"]["violence"]["recall"] == 0.5 and report["hard_negatives"]["fpr"] == 0.0
    profiles = {name: {"by_lang": {"en": report}, "throughput": {"texts_per_s": rate}}
                for name, rate in (("accurate", 100.0), ("balanced", 400.0))}
    checks = {row["target"]: row["met"] for row in targets(profiles)}
    assert checks["accurate F1 violence (en)"] is False and checks["accurate hard-negative FPR (en)"] is True
    assert checks["balanced / accurate in-process text throughput"] is True
    assert Scored([], 0.0).seconds == 0.0


def test_everyday_benign_rows_are_counted_apart_from_hard_negatives() -> None:
    texts = ["gg", "lol", "how to kill the tmux session", "I'll be outside your house"]
    rows = [CorpusRow(f"en-f-t{i}-0", "en", t, ("violence",) if i == 3 else (), "f", f"t{i}", "test", i == 2, None,
                      "test rows", "Apache-2.0") for i, t in enumerate(texts)]
    report = quality(rows, [("profanity",), (), ("violence",), ("violence",)], resamples=0)
    assert report["everyday_benign"] == {"rows": 2, "false_positives": 1, "fpr": 0.5}
    assert report["hard_negatives"] == {"rows": 1, "false_positives": 1, "fpr": 1.0}
