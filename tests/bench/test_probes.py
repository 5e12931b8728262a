"""bench/probes.py: probe files parse with errors that name the line, and each profile's decisions are
summarised per file (a fake model: `violence` fires on the word 'threat')."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.probes import PROBES_DIR, ProbeLine, parse_probe, run_probe, summarise
from services.router.profiles import FAST_MODEL, SEMANTIC_MODEL
from tests.bench.test_quality import POLICY, FakeModel


def test_parse_probe_reads_labels_and_names_bad_lines() -> None:
    lines = parse_probe("benign\thello\n\nhate,violence\tthey should all die\n", "p.tsv")
    assert lines == [ProbeLine(frozenset(), "hello"), ProbeLine(frozenset({"hate", "violence"}), "they should all die")]
    with pytest.raises(ValueError, match=r"p\.tsv:2: expected 'label<TAB>text'"):
        parse_probe("benign\thi\nno tab here\n", "p.tsv")
    with pytest.raises(ValueError, match=r"p\.tsv:1: unknown categories \['threat'\]"):
        parse_probe("threat\tx\n", "p.tsv")


def test_summarise_counts_misses_and_false_positives() -> None:
    lines = [ProbeLine(frozenset({"violence"}), "a"), ProbeLine(frozenset({"hate", "violence"}), "b"),
             ProbeLine(frozenset({"spam"}), "c"), ProbeLine(frozenset(), "d"), ProbeLine(frozenset(), "e")]
    out = summarise(lines, [("violence",), ("violence",), ("harassment",), (), ("sexual",)])
    assert (out["harmful"], out["harmful_flagged"], out["harmful_caught"]) == (3, 3, 2)
    assert out["recall"] == {"hate": 0.0, "violence": 1.0, "spam": 0.0}
    assert out["misses"] == [{"text": "c", "labels": ["spam"], "fired": ["harassment"]}]
    assert (out["benign"], out["benign_flagged"]) == (2, 1) and out["false_positives"][0]["text"] == "e"


def test_run_probe_routes_each_profile_like_the_router() -> None:
    lines = [ProbeLine(frozenset({"violence"}), "a threat here"), ProbeLine(frozenset(), "nice weather")]
    models = {FAST_MODEL: FakeModel(0.5), SEMANTIC_MODEL: FakeModel(0.95)}
    out = run_probe(lines, ["fast", "accurate"], models, POLICY)
    assert out["accurate"]["harmful_caught"] == 1 and out["accurate"]["benign_flagged"] == 0


def test_shipped_probe_files_parse() -> None:
    files = sorted(PROBES_DIR.glob("*.tsv"))
    assert len(files) >= 5
    for path in files:
        lines = parse_probe(path.read_text(encoding="utf-8"), str(path))
        assert any(line.labels for line in lines) and any(not line.labels for line in lines), path
    assert (PROBES_DIR / "README.md").is_file() and Path(PROBES_DIR).name == "probe_sets"
