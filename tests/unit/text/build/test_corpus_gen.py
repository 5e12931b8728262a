"""The functional corpus generator and the committed English corpus (services/text/data/corpus/en.jsonl)."""

from __future__ import annotations

import json
import random
import re
from collections import defaultdict
from pathlib import Path

import pytest

from services.text.build.corpus_gen import (DATA_DIR, HOLDOUT_MIN_VALUES, SPLITS, Row, filler_pools, generate,
                                            main, render)
from services.text.build.corpus_spec import TEXT_CATEGORIES, CorpusSpecError, Spec, load_spec
from services.text.build.obfuscate import TRANSFORMS

TEMPLATES = DATA_DIR / "en_templates.yaml"
COMMITTED = DATA_DIR / "en.jsonl"
FIELDS = {"id", "lang", "text", "labels", "functionality", "template", "split", "hard_negative", "evasion",
          "source", "licence"}


@pytest.fixture(scope="module")
def spec() -> Spec:
    return load_spec(TEMPLATES, transforms=frozenset(TRANSFORMS))


@pytest.fixture(scope="module")
def rows(spec: Spec) -> list[Row]:
    return generate(spec)


def _norm(text: str) -> str:
    return " ".join(text.casefold().split())


def test_generation_is_deterministic(spec: Spec, rows: list[Row]) -> None:
    again = generate(load_spec(TEMPLATES, transforms=frozenset(TRANSFORMS)))
    assert render(again) == render(rows)


def test_committed_file_equals_a_fresh_generation(rows: list[Row]) -> None:
    assert COMMITTED.read_text(encoding="utf-8") == render(rows), (
        "en.jsonl is stale: python -m services.text.build.corpus_gen --lang en --out " + str(COMMITTED))


def test_cli_writes_the_same_bytes(tmp_path: Path, rows: list[Row]) -> None:
    out = tmp_path / "en.jsonl"
    assert main(["--lang", "en", "--out", str(out)]) == 0
    assert out.read_bytes() == render(rows).encode("utf-8")


def test_size_is_in_the_planned_range(rows: list[Row]) -> None:
    # 1.1.0 roughly doubled the positive templates and 1.2.0 added ~1,300 more for the weakest
    # functionalities and their hard negatives (issue 13: more diverse data), 1.4.0 ~360 new frames
    # (~2,150 rows) for the functionalities the models got wrong on dev, 1.6.0 48 identity-affirming
    # frames (538 rows); the cap keeps the corpus cheap enough to regenerate and train on in the test run.
    assert 4000 <= len(rows) <= 32000
    per_template: dict[str, int] = defaultdict(int)
    for row in rows:
        per_template[row.template] += 1
    assert max(per_template.values()) <= 25


def test_rows_follow_the_schema(spec: Spec) -> None:
    assert re.fullmatch(r"\d+\.\d+\.\d+", spec.version), spec.version
    ids = set()
    for line in COMMITTED.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        assert set(row) == FIELDS
        assert list(row) == sorted(row), "keys are sorted"
        assert row["lang"] == "en" and row["licence"] == "Apache-2.0"
        assert row["source"] == f"auditmesh-functional-en/{spec.version} (project-written)"
        assert set(row["labels"]) <= set(TEXT_CATEGORIES) and row["labels"] == sorted(set(row["labels"]))
        assert row["split"] in SPLITS
        assert isinstance(row["hard_negative"], bool)
        assert row["evasion"] is None or re.fullmatch(r"[a-z_]+", row["evasion"])
        assert row["id"].startswith(f"en-{row['functionality']}-{row['template']}-")
        assert row["text"].strip() and "{" not in row["text"], row["text"]
        if row["hard_negative"]:
            assert set(row["labels"]) <= {"profanity"}, row
        ids.add(row["id"])
    assert len(ids) == len(COMMITTED.read_text(encoding="utf-8").splitlines()), "ids are unique"


def test_no_template_is_in_two_splits(rows: list[Row]) -> None:
    splits: dict[str, set[str]] = defaultdict(set)
    for row in rows:
        splits[row.template].add(row.split)
    assert all(len(s) == 1 for s in splits.values())


def test_a_derived_template_keeps_the_split_of_its_source(rows: list[Row]) -> None:
    split_of = {row.template: row.split for row in rows}
    derived = [row for row in rows if "~" in row.template]
    assert derived, "the corpus has seeded obfuscations"
    for row in derived:
        source = row.template.split("~")[0]
        assert split_of[source] == row.split, row
        assert row.evasion is not None


def test_no_text_is_in_two_splits(rows: list[Row]) -> None:
    splits: dict[str, set[str]] = defaultdict(set)
    for row in rows:
        splits[_norm(row.text)].add(row.split)
    assert all(len(s) == 1 for s in splits.values())
    assert len(splits) == len(rows), "no duplicate texts at all"


@pytest.mark.parametrize("category", TEXT_CATEGORIES)
def test_every_category_has_positives_in_every_split(rows: list[Row], category: str) -> None:
    for split in SPLITS:
        positives = [r for r in rows if category in r.labels and r.split == split and not r.hard_negative]
        assert len(positives) >= 20, (category, split, len(positives))


def test_every_hard_negative_functionality_is_in_test(rows: list[Row]) -> None:
    hard = {r.functionality for r in rows if r.hard_negative}
    assert len(hard) >= 15
    in_test = {r.functionality for r in rows if r.hard_negative and r.split == "test"}
    assert hard == in_test


def test_every_functionality_with_three_templates_has_each_split(spec: Spec, rows: list[Row]) -> None:
    for functionality in spec.functionalities:
        if len(functionality.templates) >= 3:
            mine = {r.split for r in rows if r.functionality == functionality.name}
            assert mine == set(SPLITS), functionality.name


def test_planned_template_counts(spec: Spec) -> None:
    by_category: dict[str, int] = defaultdict(int)
    hard_negative = 0
    for functionality in spec.functionalities:
        for template in functionality.templates:
            if functionality.hard_negative:
                hard_negative += 1
            for label in template.labels:
                by_category[label] += 1
    assert all(by_category[c] >= 40 for c in TEXT_CATEGORIES), dict(by_category)
    assert by_category["violence"] >= 60 and hard_negative >= 150
    indirect = next(f for f in spec.functionalities if f.name == "threat_indirect_conditional")
    assert len(indirect.templates) >= 30


def test_test_templates_use_held_out_fillers(spec: Spec) -> None:
    pools = filler_pools(spec.lang, spec.fillers)
    for slot, values in spec.fillers.items():
        if len(values) >= HOLDOUT_MIN_VALUES:
            assert pools["test"][slot] and pools["train"][slot], slot
            assert not set(pools["test"][slot]) & set(pools["train"][slot]), slot
            assert pools["train"][slot] == pools["dev"][slot]
        else:
            assert pools["test"][slot] == pools["train"][slot] == tuple(values)


def test_held_out_fillers_appear_only_in_test_rows(spec: Spec, rows: list[Row]) -> None:
    pools = filler_pools(spec.lang, spec.fillers)
    names = set(pools["test"]["name"])
    name = re.compile(r"\b(" + "|".join(sorted(names)) + r")\b")
    # a held-out name may appear in the fixed text of a template, but no train/dev template fills a slot with it
    slot_templates = {t.id for f in spec.functionalities for t in f.templates if "{name}" in t.text}
    leaked = [r for r in rows if r.split != "test" and r.template.split("~")[0] in slot_templates
              and name.search(r.text)]
    assert not leaked, leaked[:3]
    assert any(name.search(r.text) for r in rows if r.split == "test")


@pytest.mark.parametrize("transform", sorted(TRANSFORMS))
def test_transforms_change_the_word_and_are_seeded(transform: str) -> None:
    function = TRANSFORMS[transform]
    for word in ("idiot", "kill", "you are a loser", "ab"):
        first = function(word, random.Random(7))
        assert first != word
        assert function(word, random.Random(7)) == first


def test_spacing_and_mask_look_as_evaders_write() -> None:
    assert TRANSFORMS["spacing"]("idiot", random.Random(0)).replace(" ", "").replace(".", "").replace(
        "-", "").replace("_", "") == "idiot"
    masked = TRANSFORMS["symbol_mask"]("fuck", random.Random(0))
    assert masked[0] == "f" and masked[-1] == "k" and masked != "fuck"
    assert TRANSFORMS["concat"]("you are an idiot", random.Random(0)).lower() == "youareanidiot"


def _write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "xx_templates.yaml"
    path.write_text("lang: xx\nversion: '1'\nlicence: Apache-2.0\nfillers: {name: [A, B]}\n" + body, encoding="utf-8")
    return path


def test_an_unknown_label_names_file_and_key(tmp_path: Path) -> None:
    path = _write(tmp_path, "functionalities:\n  - name: f\n    labels: [hateful]\n"
                            "    templates: [{id: t1, text: 'hi {name}'}]\n")
    with pytest.raises(CorpusSpecError, match=r"xx_templates.yaml: functionalities\[0\].labels: 'hateful'"):
        load_spec(path)


def test_a_slot_without_fillers_is_rejected(tmp_path: Path) -> None:
    path = _write(tmp_path, "functionalities:\n  - name: f\n    labels: []\n"
                            "    templates: [{id: t1, text: 'hi {nobody}'}]\n")
    with pytest.raises(CorpusSpecError, match=r"templates\[0\].text: slot \{nobody\}"):
        load_spec(path)


def test_a_template_without_labels_is_rejected(tmp_path: Path) -> None:
    path = _write(tmp_path, "functionalities:\n  - name: f\n    templates: [{id: t1, text: 'hi'}]\n")
    with pytest.raises(CorpusSpecError, match=r"templates\[0\]: no labels"):
        load_spec(path)


def test_a_hard_negative_with_a_harm_label_is_rejected(tmp_path: Path) -> None:
    path = _write(tmp_path, "functionalities:\n  - name: f\n    hard_negative: true\n    labels: [violence]\n"
                            "    templates: [{id: t1, text: 'hi'}]\n")
    with pytest.raises(CorpusSpecError, match="hard negative may only carry"):
        load_spec(path)


def test_a_repeated_template_id_is_rejected(tmp_path: Path) -> None:
    path = _write(tmp_path, "functionalities:\n  - name: f\n    labels: []\n"
                            "    templates: [{id: t1, text: 'a'}, {id: t1, text: 'b'}]\n")
    with pytest.raises(CorpusSpecError, match="'t1' appears twice"):
        load_spec(path)


def test_the_same_text_with_different_labels_is_an_error(tmp_path: Path) -> None:
    path = _write(tmp_path, "functionalities:\n  - name: f\n    labels: []\n    templates: [{id: t1, text: 'hi'}]\n"
                            "  - name: g\n    labels: [spam]\n    templates: [{id: t2, text: 'Hi'}]\n")
    with pytest.raises(CorpusSpecError, match="'t1' and 't2'"):
        generate(load_spec(path))


def test_a_small_file_splits_by_template_and_holds_out_fillers(tmp_path: Path) -> None:
    names = ", ".join(f"N{i}" for i in range(20))
    path = tmp_path / "xx_templates.yaml"
    templates = "".join(f"      - {{id: t{i}, text: 'hello {{name}} number {i}'}}\n" for i in range(10))
    path.write_text(f"lang: xx\nversion: '2'\nlicence: Apache-2.0\nmax_rows: 25\nfillers: {{name: [{names}]}}\n"
                    f"functionalities:\n  - name: greet\n    labels: []\n    templates:\n{templates}",
                    encoding="utf-8")
    rows = generate(load_spec(path))
    by_split: dict[str, set[str]] = defaultdict(set)
    for row in rows:
        by_split[row.split].add(row.text.split()[1])
    assert {r.split for r in rows} == set(SPLITS)
    assert not by_split["test"] & (by_split["train"] | by_split["dev"])
    assert sum(1 for t in {(r.template, r.split) for r in rows} if t[1] == "test") == 2
