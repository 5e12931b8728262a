"""Tests for services/text/build/lexicon_curation.py and the reproducibility of build_lexicon.py."""

from __future__ import annotations

import json

import pytest

from services.text.build.build_lexicon import CURATION_PATH, build_document, render
from services.common.text_match.lexicon import DEFAULT_LEXICON_PATH
from services.text.build.lexicon_curation import Curation, RawTerm, curate

LIST = "some/list.json"


def curation(**overrides: object) -> Curation:
    document: dict[str, object] = {"list_default_category": {LIST: "profanity"}, "single_cjk_allowed": ["屌"],
                "exclude": {"benign": ["你妈"]}, "category": {"hate": ["slut"]},
                "sexual_markers_cjk": ["淫"], "severity": {"3": ["操你妈"], "1": ["屌"]}}
    document.update(overrides)
    return Curation.from_json(document)


def run(*terms: str) -> dict[str, tuple[str, int]]:
    result = curate([RawTerm(t, LIST, "src") for t in terms], curation())
    return {e.term: (e.category, e.severity) for e in result.entries}


def test_junk_is_dropped() -> None:
    assert run("", "x", "13.", "xxx", "性", "2024") == {}


def test_allowed_single_cjk_character_is_kept() -> None:
    assert run("屌") == {"屌": ("profanity", 1)}


def test_exclusions_match_after_normalisation() -> None:
    result = curate([RawTerm("你媽", LIST, "src")], curation())  # traditional form of an excluded term
    assert result.entries == () and result.dropped == (("你媽", "src", "benign"),)


def test_category_rules_in_order() -> None:
    assert run("slut", "淫乱", "操你妈", "傻逼") == {
        "slut": ("hate", 2), "淫乱": ("sexual", 2), "操你妈": ("profanity", 3), "傻逼": ("profanity", 2)}


def test_unknown_category_in_rules_is_rejected() -> None:
    with pytest.raises(ValueError, match="category"):
        curation(category={"drugs": ["x"]})


def test_list_without_default_is_rejected() -> None:
    with pytest.raises(ValueError, match="list_default_category"):
        curate([RawTerm("傻逼", "other/list.json", "src")], curation())


def test_committed_default_lexicon_matches_a_fresh_build() -> None:
    document, _ = build_document(json.loads(CURATION_PATH.read_text(encoding="utf-8")))
    assert render(document) == DEFAULT_LEXICON_PATH.read_text(encoding="utf-8"), (
        "default_lexicon.json is stale: run python -m services.text.build.build_lexicon")
