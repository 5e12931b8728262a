"""The verdict cache benchmark's workload: the duplicate ratio it promises, Zipf-skewed repeats, and
texts of one step never reused by another."""

from __future__ import annotations

from collections import Counter

import pytest

from bench.verdict_cache import zipf_workload


@pytest.mark.parametrize("ratio", [0.0, 0.3, 0.6])
def test_the_duplicate_ratio_is_what_was_asked(ratio: float) -> None:
    texts = zipf_workload(4000, ratio, tag="t", seed=3)
    assert abs((1 - len(set(texts)) / len(texts)) - ratio) < 0.03


def test_repeats_are_skewed_towards_the_first_seen() -> None:
    counts = Counter(zipf_workload(4000, 0.6, tag="t", seed=3))
    top = [count for _, count in counts.most_common(3)]
    assert top[0] > 10 * sorted(counts.values())[len(counts) // 2]  # the head repeats far more than the median


def test_steps_do_not_share_texts() -> None:
    assert not set(zipf_workload(200, 0.5, tag="a")) & set(zipf_workload(200, 0.5, tag="b"))
    with pytest.raises(ValueError):
        zipf_workload(10, 1.0, tag="x")
