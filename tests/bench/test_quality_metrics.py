"""bench/quality_metrics.py and bench/corpus.py: the numbers the quality report is made of."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.corpus import available_langs, load_corpus
from bench.quality_metrics import category_report, functionality_report, hard_negative_fpr, row_passes


def test_precision_recall_f1_count_fired_against_labels() -> None:
    labels = [("hate",), ("hate",), (), ()]
    fired = [("hate",), (), ("hate",), ()]
    report = category_report(["a", "b", "c", "d"], labels, fired, categories=("hate", "spam"), resamples=0)
    assert report["hate"] == {"support": 2, "precision": 0.5, "recall": 0.5, "f1": 0.5}
    assert report["spam"] == {"support": 0, "precision": 0.0, "recall": 0.0, "f1": 0.0}


def test_bootstrap_interval_resamples_templates_and_brackets_the_estimate() -> None:
    templates = [f"t{i // 4}" for i in range(40)]
    labels = [("x",)] * 40
    fired = [("x",) if i % 8 else () for i in range(40)]
    entry = category_report(templates, labels, fired, categories=("x",), resamples=200)["x"]
    low, high = entry["recall_ci"]
    assert low <= entry["recall"] <= high and low < high
    perfect = category_report(templates, labels, labels, categories=("x",), resamples=200)["x"]
    assert perfect["f1_ci"] == [1.0, 1.0]


def test_a_row_passes_only_with_exactly_its_labels() -> None:
    assert row_passes(("violence",), ("violence",)) and row_passes((), ())
    assert not row_passes(("violence",), ()) and not row_passes((), ("spam",))
    assert not row_passes(("violence",), ("violence", "hate"))


def test_functionality_report_counts_misses_and_wrong_fires() -> None:
    report = functionality_report(["threat", "threat", "hn_kill"], [("violence",), ("violence",), ()],
                                  [("violence",), (), ("violence",)])
    assert report["threat"] == {"rows": 2, "pass_rate": 0.5, "missed": {"violence": 1}, "wrongly_fired": {}}
    assert report["hn_kill"]["wrongly_fired"] == {"violence": 1}


def test_hard_negative_fpr_ignores_categories_in_the_rows_labels() -> None:
    result = hard_negative_fpr(["a", "b", "c"], [(), ("profanity",), ()], [("violence",), ("profanity",), ()],
                               [True, True, False], resamples=50)
    assert (result["rows"], result["false_positives"], result["fpr"]) == (2, 1, 0.5)
    assert hard_negative_fpr(["a"], [()], [()], [False]) == {"rows": 0, "fpr": None}


def test_corpus_reader_filters_the_split_and_names_a_missing_language(tmp_path: Path) -> None:
    rows: list[dict[str, object]] = [{"id": f"en-f-t{i}-0", "lang": "en", "text": f"text {i}", "labels": [], "functionality": "f",
             "template": f"t{i}", "split": split, "hard_negative": False, "evasion": None, "source": "s", "licence": "l"}
            for i, split in enumerate(("train", "test", "test"))]
    (tmp_path / "en.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    assert [r.text for r in load_corpus(["en"], "test", tmp_path)] == ["text 1", "text 2"]
    assert available_langs(tmp_path) == ["en"]
    with pytest.raises(FileNotFoundError, match="no zh corpus"):
        load_corpus(["zh"], "test", tmp_path)
    with pytest.raises(ValueError, match="split"):
        load_corpus(["en"], "holdout", tmp_path)


def test_the_shipped_english_corpus_has_a_test_split() -> None:
    rows = load_corpus(["en"], "test")
    assert rows and {r.split for r in rows} == {"test"} and any(r.hard_negative for r in rows)
