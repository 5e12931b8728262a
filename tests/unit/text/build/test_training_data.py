"""Template weighting of the corpus training rows (services/text/build/training_data.template_balanced)."""

from __future__ import annotations

import pytest

from services.text.build.training_data import Example, template_balanced


def _rows(sizes: dict[str, int], source: str = "corpus:") -> list[Example]:
    return [Example(f"{name} {i}", frozenset(), 1.0, f"{source}{name}", "test") for name, n in sizes.items()
            for i in range(n)]


def _weights(examples: tuple[Example, ...]) -> dict[str, float]:
    return {e.group: e.weight for e in examples}


def test_exponent_zero_keeps_every_weight() -> None:
    rows = _rows({"a": 9, "b": 1})
    assert [e.weight for e in template_balanced(rows, 0.0)] == [1.0] * 10


def test_a_big_template_weighs_less_per_row_but_keeps_the_corpus_total() -> None:
    rows = _rows({"big": 16, "small": 1})
    weighted = template_balanced(rows, 0.5)
    per_row = _weights(weighted)
    assert per_row["corpus:big"] == pytest.approx(per_row["corpus:small"] / 4)
    assert sum(e.weight for e in weighted) == pytest.approx(len(rows))


def test_exponent_one_gives_every_template_the_same_total() -> None:
    weighted = template_balanced(_rows({"a": 12, "b": 3, "c": 1}), 1.0)
    totals: dict[str, float] = {}
    for e in weighted:
        totals[e.group] = totals.get(e.group, 0.0) + e.weight
    assert len({round(t, 9) for t in totals.values()}) == 1


def test_rows_from_other_sources_keep_their_weight() -> None:
    sms = [Example("hi", frozenset(), 0.5, "sms:0", "sms")] * 3
    weighted = template_balanced(_rows({"a": 4}) + sms, 0.5)
    assert [e.weight for e in weighted if e.group == "sms:0"] == [0.5, 0.5, 0.5]
    assert sum(e.weight for e in weighted if e.group == "corpus:a") == pytest.approx(4.0)


def test_a_negative_exponent_is_refused() -> None:
    with pytest.raises(ValueError, match="exponent"):
        template_balanced(_rows({"a": 2}), -0.5)
