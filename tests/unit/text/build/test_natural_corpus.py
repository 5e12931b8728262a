"""The naturalistic corpus files keep the README's row format, and the train/dev cut is stable."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from services.common.contracts.text import CATEGORIES
from services.text.build.natural_corpus import DEV_FRACTION, NATURAL_DIR, dev_bucket, natural_rows, row_problems

FILES = sorted(NATURAL_DIR.glob("*/*.jsonl"))
GOOD = {"id": "en-x-0001", "text": "hi", "labels": [], "functionality": "benign_everyday", "target": "none",
        "platform": "chat", "hard_negative": False, "lang": "en", "subcategories": []}


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_row_follows_the_readme(path: Path) -> None:
    lang = path.parent.name
    slice_name = path.stem.split("_", 1)[1]
    seen: set[str] = set()
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        row = json.loads(line)
        assert row_problems(row, lang, frozenset(CATEGORIES)) == [], f"{path.name}:{number}"
        assert row["id"].startswith(f"{lang}-{slice_name}-"), f"{path.name}:{number}: id {row['id']}"
        assert row["id"] not in seen, f"{path.name}:{number}: duplicate id {row['id']}"
        seen.add(row["id"])


def test_test_files_were_not_copied_from_training_files() -> None:
    # Writers of either split never read the other; a short everyday line ("弹幕护体") may still come out
    # the same, and bench.natural_quality leaves such rows out. More than 1 % would mean copying.
    for lang in ("zh", "en"):
        pending = [json.loads(line)["text"].strip() for path in (NATURAL_DIR / lang).glob("pending_*.jsonl")
                   for line in path.read_text(encoding="utf-8").splitlines()]
        train = {r["text"].strip() for r in natural_rows(lang)} | set(pending)
        test = [json.loads(line)["text"].strip() for path in (NATURAL_DIR / lang).glob("test_*.jsonl")
                for line in path.read_text(encoding="utf-8").splitlines()]
        shared = [text for text in test if text in train]
        assert len(shared) <= 0.01 * len(test), f"{lang}: {shared[:5]}"


def test_row_problems_name_each_fault() -> None:
    assert row_problems(GOOD, "en", frozenset(CATEGORIES)) == []
    bad = {**GOOD, "labels": ["hate"], "platform": "weibo", "subcategories": ["violence/threat"]}
    problems = row_problems(bad, "en", frozenset(CATEGORIES))
    assert any("benign functionality" in p for p in problems)
    assert any("platform 'weibo'" in p for p in problems)
    assert any("without its parent label violence" in p for p in problems)
    assert row_problems({**GOOD, "functionality": "slur"}, "en", frozenset(CATEGORIES)) == \
        ["harmful functionality slur without a label"]
    assert row_problems({"id": "x"}, "en", frozenset(CATEGORIES))[0].startswith("missing keys")


def test_the_dev_fold_is_stable_and_about_its_fraction() -> None:
    assert dev_bucket("zh-live-0001") == dev_bucket("zh-live-0001")
    rows = natural_rows("en")
    share = sum(r["split"] == "dev" for r in rows) / len(rows)
    assert abs(share - DEV_FRACTION) < 0.04
