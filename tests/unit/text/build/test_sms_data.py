"""Tests for services/text/build/sms_data.py: the split is deterministic, stratified and leak-free."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from services.text.build.sms_data import SmsRow, heldout_document, load_sms, read_heldout, split_rows


def toy_rows() -> tuple[SmsRow, ...]:
    texts = [(0, f"ham {i}") for i in range(40)] + [(1, f"spam {i}") for i in range(10)] + [(0, "ham 3")]
    return tuple(SmsRow(i, label, text) for i, (label, text) in enumerate(texts))


def test_split_is_deterministic_and_stratified() -> None:
    first, second = split_rows(toy_rows()), split_rows(toy_rows())
    assert first == second
    assert sum(r.label for r in first.heldout) == 2  # 20% of 10 distinct spam
    assert len({r.text for r in first.heldout if r.label == 0}) == 8  # 20% of 40 distinct ham


def test_duplicates_never_straddle_the_split() -> None:
    split = split_rows(toy_rows())
    assert not {r.text for r in split.train} & {r.text for r in split.heldout}


def test_heldout_file_round_trip(tmp_path: Path) -> None:
    rows = toy_rows()
    split = split_rows(rows)
    path = tmp_path / "heldout.json"
    path.write_text(json.dumps(heldout_document(split)))
    assert read_heldout(path, rows) == split.heldout


def test_heldout_file_mismatch_is_detected(tmp_path: Path) -> None:
    path = tmp_path / "heldout.json"
    path.write_text(json.dumps({"rows": [[0, 1, "0000000000000000"]]}))
    with pytest.raises(ValueError, match="does not match"):
        read_heldout(path, toy_rows())


def test_bad_fraction_is_rejected() -> None:
    with pytest.raises(ValueError, match="heldout_fraction"):
        split_rows(toy_rows(), heldout_fraction=1.5)


def test_real_corpus_shape() -> None:
    rows = load_sms()
    assert (len(rows), sum(r.label for r in rows)) == (4862, 642)
