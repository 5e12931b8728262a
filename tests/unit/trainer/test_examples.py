"""Tests for services/trainer/examples.py: labelled JSONL read and every fault named by line and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.trainer.examples import MAX_TEXT_CHARS, ExamplesError, check_category, parse_lines, read_examples


def test_rows_are_read_with_built_in_and_custom_categories_and_blank_lines_skipped(tmp_path: Path) -> None:
    path = tmp_path / "labels.jsonl"
    path.write_text('{"text": "free airdrop, dm me", "labels": {"spam": 1, "custom.crypto_scam": 1}}\n\n'
                    '{"text": "see you at lunch", "labels": {"custom.crypto_scam": 0}}\n', encoding="utf-8")
    rows = read_examples(path)
    assert [(r.text, dict(r.labels)) for r in rows] == [
        ("free airdrop, dm me", {"spam": 1, "custom.crypto_scam": 1}), ("see you at lunch", {"custom.crypto_scam": 0})]


@pytest.mark.parametrize(("line", "message"), [
    ("not json", "labels.jsonl:2: not JSON"),
    ('["a list"]', "labels.jsonl:2: each line must be a JSON object"),
    ('{"text": "", "labels": {"spam": 1}}', "labels.jsonl:2: 'text' must be a non-empty string"),
    ('{"text": "hi"}', "labels.jsonl:2: 'labels' must be an object"),
    ('{"text": "hi", "labels": {"crypto": 1}}', "labels.jsonl:2: labels.crypto: unknown category 'crypto'"),
    ('{"text": "hi", "labels": {"custom.Crypto Scam": 1}}', "labels.jsonl:2: labels.custom.Crypto Scam: unknown"),
    ('{"text": "hi", "labels": {"spam": 2}}', "labels.jsonl:2: labels.spam: must be 1 or 0, got 2"),
    ('{"text": "hi", "labels": {"spam": 0.5}}', "labels.jsonl:2: labels.spam: must be 1 or 0, got 0.5"),
])
def test_each_fault_names_the_file_line_and_key(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "labels.jsonl"
    path.write_text('{"text": "ok", "labels": {"spam": 0}}\n' + line + "\n", encoding="utf-8")
    with pytest.raises(ExamplesError, match=message.replace(".", r"\.").replace("[", r"\[").replace("(", r"\(")):
        read_examples(path)


def test_an_oversized_text_and_an_unreadable_file_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ExamplesError, match=f"more than {MAX_TEXT_CHARS}"):
        parse_lines(['{"text": "' + "x" * (MAX_TEXT_CHARS + 1) + '", "labels": {"spam": 1}}'])
    with pytest.raises(ExamplesError, match="cannot read"):
        read_examples(tmp_path / "missing.jsonl")
    (tmp_path / "latin1.jsonl").write_bytes(b'{"text": "caf\xe9", "labels": {"spam": 0}}\n')
    with pytest.raises(ExamplesError, match="cannot read"):
        read_examples(tmp_path / "latin1.jsonl")


def test_category_names() -> None:
    assert check_category("self_harm") == "self_harm"
    assert check_category("custom.crypto_scam_2") == "custom.crypto_scam_2"
    for bad in ("custom.", "custom.2fast", "custom.a-b", "Hate"):
        with pytest.raises(ExamplesError):
            check_category(bad)
