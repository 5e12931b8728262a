"""Loading and validating the Chinese corpus templates: every error names the file and the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.text.build.corpus_zh_spec import SlotValue, SpecError, load_spec

HEAD = "lang: zh\nversion: 1\nseed: 1\n"


def _write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "zh_templates.yaml"
    path.write_text(HEAD + body, encoding="utf-8")
    return path


def test_a_valid_file_loads(tmp_path: Path) -> None:
    path = _write(tmp_path, "fillers:\n  you: [你, 楼上]\nfunctionalities:\n  har:\n    labels: [harassment]\n"
                            "    transforms: [separators]\n    templates:\n"
                            "      - {id: h1, text: '{you}是[{x}]', slots: {x: {plain: [废物], pinyin_initials: [fw]}}}\n")
    spec = load_spec(path)
    template = spec.functionalities[0].templates[0]
    assert template.functionality == "har" and spec.functionalities[0].transform_rows == 1
    assert spec.slot_values(template, "x") == (SlotValue("废物", None), SlotValue("fw", "pinyin_initials"))
    assert spec.slot_values(template, "you")[1] == SlotValue("楼上", None)


@pytest.mark.parametrize(("body", "message"), [
    ("functionalities:\n  f:\n    labels: [insult]\n    templates: [{id: a, text: x}]\n", r"functionalities\.f\.labels.*insult"),
    ("functionalities:\n  f:\n    labels: [spam]\n    hard_negative: true\n    templates: [{id: a, text: x}]\n", "labels must be"),
    ("functionalities:\n  f:\n    labels: [spam]\n    templates: [{id: a, text: '{nope}'}]\n", r"\(a\)\.text.*\{nope\}"),
    ("functionalities:\n  f:\n    labels: [spam]\n    templates: [{id: a, text: x, n: 26}]\n", "cap of 25"),
    ("functionalities:\n  f:\n    labels: [spam]\n    templates: [{id: a, text: x}, {id: a, text: y}]\n", "'a' is used by both"),
    ("functionalities:\n  f:\n    labels: [spam]\n    templates: [{id: a, text: '[x'}]\n", "unclosed"),
    ("functionalities:\n  f:\n    labels: [spam]\n    transforms: [homophone]\n    templates: [{id: a, text: x}]\n", r"f\.transforms"),
    ("functionalities:\n  f:\n    labels: [spam]\n    templates: [{id: a, text: '{s}', slots: {s: {leet: [x]}}}]\n", r"slots\.s\.leet"),
    ("functionalities:\n  f:\n    labels: [spam]\n    templates: [{id: a, text: x, texts: [y]}]\n", "exactly one of text or texts"),
    ("functionalities:\n  F-1:\n    labels: [spam]\n    templates: [{id: a, text: x}]\n", "F-1"),
    ("fillers:\n  you: [你, 你]\nfunctionalities:\n  f:\n    labels: [spam]\n    templates: [{id: a, text: x}]\n", r"fillers\.you: duplicate"),
])
def test_errors_name_file_and_key(tmp_path: Path, body: str, message: str) -> None:
    path = _write(tmp_path, body)
    with pytest.raises(SpecError, match=message) as caught:
        load_spec(path)
    assert str(path) in str(caught.value)


def test_malformed_yaml_names_the_file(tmp_path: Path) -> None:
    path = _write(tmp_path, "functionalities: [unclosed\n")
    with pytest.raises(SpecError, match="not valid YAML"):
        load_spec(path)
