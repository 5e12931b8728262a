"""The Chinese functional corpus: the committed file, its splits and schema, and the generator."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from services.text.build.corpus_gen_zh import DEFAULT_OUT, DEFAULT_TEMPLATES, dumps, generate, source, summary_markdown
from services.text.build.corpus_zh_spec import CATEGORIES, EVASIONS, MAX_ROWS_PER_TEMPLATE, CorpusSpec, SpecError, load_spec
from services.text.build.corpus_zh_split import SPLITS, held_out_fillers

REPO = Path(__file__).resolve().parents[4]
README = DEFAULT_OUT.with_name("README_zh.md")
KEYS = {"id", "lang", "text", "labels", "functionality", "template", "split", "hard_negative", "evasion",
        "source", "licence"}

Row = dict[str, Any]


@pytest.fixture(scope="module")
def spec() -> CorpusSpec:
    return load_spec(DEFAULT_TEMPLATES)


@pytest.fixture(scope="module")
def rows(spec: CorpusSpec) -> list[Row]:
    return generate(spec)


def test_generation_is_deterministic(spec: CorpusSpec, rows: list[Row]) -> None:
    assert dumps(generate(spec)) == dumps(rows)


def test_cli_output_does_not_depend_on_the_hash_seed(rows: list[Row], tmp_path: Path) -> None:
    out = tmp_path / "zh.jsonl"
    env = dict(os.environ, PYTHONHASHSEED="12345")
    subprocess.run([sys.executable, "-m", "services.text.build.corpus_gen_zh", "--out", str(out)],
                   cwd=REPO, env=env, check=True, capture_output=True)
    assert out.read_bytes() == dumps(rows).encode("utf-8")


def test_committed_file_equals_regeneration(rows: list[Row]) -> None:
    assert DEFAULT_OUT.read_bytes() == dumps(rows).encode("utf-8"), (
        "zh.jsonl is stale: run `python -m services.text.build.corpus_gen_zh --out services/text/data/corpus/zh.jsonl`")


def test_readme_counts_match_the_corpus(rows: list[Row]) -> None:
    assert summary_markdown(rows) in README.read_text(encoding="utf-8"), (
        "README_zh.md's tables are stale: paste the generator's stdout into it")


def test_no_template_in_two_splits(rows: list[Row]) -> None:
    splits: dict[str, set[str]] = defaultdict(set)
    for row in rows:
        splits[row["template"]].add(row["split"])
    assert {t: s for t, s in splits.items() if len(s) > 1} == {}


def test_no_text_is_duplicated(rows: list[Row]) -> None:
    counts = Counter(row["text"] for row in rows)
    assert [text for text, n in counts.items() if n > 1] == []


def test_every_category_has_positives_in_each_split(rows: list[Row]) -> None:
    present = {(label, row["split"]) for row in rows for label in row["labels"]}
    assert {(c, s) for c in CATEGORIES for s in SPLITS} - present == set()


def test_every_functionality_with_three_templates_is_in_each_split(rows: list[Row]) -> None:
    seen: dict[str, set[str]] = defaultdict(set)
    templates: dict[str, set[str]] = defaultdict(set)
    for row in rows:
        seen[row["functionality"]].add(row["split"])
        templates[row["functionality"]].add(row["template"])
    missing = {f: set(SPLITS) - s for f, s in seen.items() if len(templates[f]) >= 3 and s != set(SPLITS)}
    assert missing == {}


def test_every_hard_negative_functionality_is_in_the_test_split(spec: CorpusSpec, rows: list[Row]) -> None:
    hard = {f.name for f in spec.functionalities if f.hard_negative}
    tested = {row["functionality"] for row in rows if row["split"] == "test" and row["hard_negative"]}
    assert len(hard) >= 15
    assert hard - tested == set()


def test_rows_follow_the_schema(spec: CorpusSpec, rows: list[Row]) -> None:
    ids = set()
    for row in rows:
        assert set(row) == KEYS, row
        assert row["lang"] == "zh"
        assert isinstance(row["text"], str) and row["text"].strip(), row
        assert row["labels"] == sorted(set(row["labels"])) and set(row["labels"]) <= set(CATEGORIES), row
        assert row["split"] in SPLITS
        assert isinstance(row["hard_negative"], bool)
        assert not (row["hard_negative"] and row["labels"]), row
        assert row["evasion"] is None or row["evasion"] in EVASIONS, row
        assert row["source"] == source(spec) == f"auditmesh-functional-zh/{spec.version} (project-written)"
        assert row["licence"] == "Apache-2.0"
        assert re.fullmatch(rf"zh-{row['functionality']}-{row['template']}-\d+", row["id"]), row
        ids.add(row["id"])
    assert len(ids) == len(rows)


def test_no_template_syntax_leaks_into_a_text(rows: list[Row]) -> None:
    assert [row["text"] for row in rows if re.search(r"[\[\]{}]", row["text"])] == []


def test_templates_stay_under_the_row_cap(rows: list[Row]) -> None:
    per_template = Counter(row["template"] for row in rows)
    assert max(per_template.values()) <= MAX_ROWS_PER_TEMPLATE


def test_size_and_coverage_targets(rows: list[Row]) -> None:
    assert 3000 <= len(rows) <= 6000
    templates: dict[str, set[str]] = defaultdict(set)
    for row in rows:
        for label in row["labels"]:
            templates[label].add(row["template"])
    assert {c: len(templates[c]) for c in CATEGORIES if len(templates[c]) < 40} == {}
    hard_templates = {row["template"] for row in rows if row["hard_negative"]}
    assert len(hard_templates) >= 150


def test_every_evasion_family_is_tested_on_positives(rows: list[Row]) -> None:
    tested = {row["evasion"] for row in rows if row["split"] == "test" and row["labels"] and row["evasion"]}
    assert set(EVASIONS) - tested == set()


def test_every_category_has_evasion_rows_in_test(rows: list[Row]) -> None:
    present = {label for row in rows if row["split"] == "test" and row["evasion"] for label in row["labels"]}
    assert set(CATEGORIES) - present == set()


def test_train_and_dev_never_use_held_out_fillers(tmp_path: Path) -> None:
    tokens = [f"填充{chr(0x4E00 + i)}" for i in range(12)]
    templates = "\n".join(f'      - {{id: t{i:02d}, text: "X{i}{{tok}}"}}' for i in range(10))
    path = tmp_path / "t.yaml"
    path.write_text(f"lang: zh\nversion: 1\nseed: 3\ndefault_n: 12\nfillers:\n  tok: [{', '.join(tokens)}]\n"
                    f"functionalities:\n  f_one:\n    labels: [spam]\n    templates:\n{templates}\n", encoding="utf-8")
    small = load_spec(path)
    held = held_out_fillers(small)["tok"]
    assert len(held) == 3
    out = generate(small)
    used = defaultdict(set)
    for row in out:
        used[row["split"]].add(re.sub(r"^X\d+", "", row["text"]))
    assert used["train"] & held == set() and used["dev"] & held == set()
    assert used["test"] & held == held


def test_same_text_with_different_labels_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text("lang: zh\nversion: 1\nseed: 3\nfunctionalities:\n"
                    "  f_a:\n    labels: [spam]\n    templates:\n      - {id: a1, text: 加我}\n"
                    "  f_b:\n    labels: []\n    hard_negative: true\n    templates:\n      - {id: b1, text: 加我}\n",
                    encoding="utf-8")
    with pytest.raises(SpecError, match="a1.*b1"):
        generate(load_spec(path))


def test_a_later_duplicate_with_the_same_labels_is_dropped(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text("lang: zh\nversion: 1\nseed: 3\nfunctionalities:\n"
                    "  f_a:\n    labels: [spam]\n    templates:\n      - {id: a1, texts: [加我, 私我]}\n"
                    "      - {id: a2, texts: [加我, 找我]}\n", encoding="utf-8")
    texts = [row["text"] for row in generate(load_spec(path))]
    assert sorted(texts) == ["加我", "找我", "私我"]


def test_hand_written_evasions_are_not_crowded_out(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text("lang: zh\nversion: 1\nseed: 3\nfunctionalities:\n  f_a:\n    labels: [harassment]\n"
                    "    templates:\n      - id: a1\n        n: 3\n        text: '{w}{x}'\n"
                    "        slots:\n          w: [你, 他, 她, 楼上, 主播]\n"
                    "          x: {plain: [废物, 垃圾], pinyin_initials: [fw], homophone: [费物]}\n", encoding="utf-8")
    evasions = sorted(str(row["evasion"]) for row in generate(load_spec(path)))
    assert evasions == ["None", "homophone", "pinyin_initials"]
