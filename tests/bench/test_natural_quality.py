"""Tests for bench/natural_quality.py: near-duplicate removal across splits and the report's arithmetic."""

from __future__ import annotations

from typing import Any

from bench.natural_quality import corpus_stats, counted_kinds, near_duplicates, report, subcategory_report
from services.common.contracts.text import TextRow
from services.router.policy import PolicyDocument, SubcategoryRule, compile_policy


def test_near_duplicates_are_found_across_spacing_and_case_but_not_for_other_messages() -> None:
    train = [{"text": "你这个傻子真的烦死了"}, {"text": "Buy cheap followers now at example dot com"}]
    test = [{"text": "你这个傻子 真的烦死了!"}, {"text": "buy cheap followers now at example dot com"},
            {"text": "今天天气很好我们去爬山"}, {"text": "你这个人真好"}]
    assert near_duplicates(test, train) == {0, 1}
    assert near_duplicates(test, []) == set()


def test_report_counts_flags_per_category_functionality_and_target() -> None:
    rows: list[dict[str, Any]] = [{"text": "a", "labels": ["hate"], "functionality": "slur", "target": "region"},
            {"text": "b", "labels": ["hate"], "functionality": "slur", "target": "region"},
            {"text": "c", "labels": [], "functionality": "counter_speech", "target": "region", "hard_negative": True},
            {"text": "d", "labels": [], "functionality": "benign_everyday", "target": "none"}]
    fired = [{"hate"}, set(), {"hate"}, set()]
    out = report(rows, fired)
    assert (out["harmful_flagged"], out["benign_flagged"], out["hard_negatives_flagged"], out["accuracy"]) == \
        (0.5, 0.5, 1.0, 0.5)
    assert out["categories"]["hate"] == {"support": 2, "recall": 0.5, "precision": 0.5}
    assert out["by_functionality"]["slur"] == {"rows": 2, "correct": 0.5}
    assert out["by_target"]["region"] == {"rows": 3, "correct": round(1 / 3, 4)}


def test_corpus_stats_report_size_lengths_and_bigram_variety() -> None:
    stats = corpus_stats([{"text": "abab", "labels": []}, {"text": "xyz", "labels": ["spam"], "hard_negative": False}])
    assert (stats["rows"], stats["harmful"], stats["benign"], stats["hard_negatives"]) == (2, 1, 1, 0)
    assert stats["length"]["min"] == 3 and stats["length"]["max"] == 4
    assert stats["distinct_bigram_ratio"] == round(4 / 5, 4)  # ab, ba, ab, xy, yz: 4 distinct of 5


def test_subcategory_report_measures_the_kind_among_rows_whose_parent_fired() -> None:
    rows: list[dict[str, Any]] = [
        {"text": "a", "labels": ["self_harm"], "subcategories": ["self_harm/intent"]},
        {"text": "b", "labels": ["self_harm"], "subcategories": ["self_harm/intent"]},
        {"text": "c", "labels": ["self_harm"], "subcategories": ["self_harm/intent"]},
        {"text": "d", "labels": ["self_harm"], "subcategories": ["self_harm/encouragement"]}]
    fired = [{"self_harm"}, {"self_harm"}, set(), {"self_harm"}]
    kinds = [{"self_harm/intent"}, set(), set(), {"self_harm/intent"}]
    intent = subcategory_report(rows, fired, kinds)["self_harm/intent"]
    assert intent == {"support": 3, "parent_fired": 2, "recall": 0.5, "precision": 0.5}
    assert subcategory_report(rows, fired, kinds)["violence/graphic"] == \
        {"support": 0, "parent_fired": 0, "recall": None, "precision": None}


def test_a_kind_counts_only_where_its_parent_fired_and_its_share_reaches_the_policys() -> None:
    policy = compile_policy(PolicyDocument(name="p", version="1",
                                           subcategories={"violence/graphic": SubcategoryRule(share=0.8)}))
    row = TextRow({}, (), subcategories={"self_harm/intent": 0.6, "violence/graphic": 0.7, "violence/threat": 0.5})
    assert counted_kinds(policy, row, {"violence"}) == {"violence/threat"}
    assert counted_kinds(policy, row, {"violence", "self_harm"}) == {"violence/threat", "self_harm/intent"}
    assert counted_kinds(policy, row, set()) == set()
