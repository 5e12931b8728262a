"""The default lexicon finds exactly what it found before, on every corpus row (readable: row id ->
categories) and on long texts made of 40 consecutive rows (golden digests: match_golden.py,
data/match_golden.json)."""

from __future__ import annotations

import json

import pytest

from tests.unit.common.text_match import match_golden
from tests.stubs import default_lexicon


@pytest.fixture(scope="module")
def golden() -> dict[str, object]:
    document: dict[str, object] = json.loads(match_golden.GOLDEN_PATH.read_text(encoding="utf-8"))
    assert document["block_rows"] == match_golden.BLOCK_ROWS and document["digest_chars"] == match_golden.DIGEST_CHARS
    return document


@pytest.mark.parametrize("lang", match_golden.LANGS)
def test_every_rows_categories_equal_the_golden(golden: dict[str, dict[str, dict[str, list[str]]]], lang: str) -> None:
    changes = match_golden.category_changes(golden[lang]["categories"], match_golden.category_map(default_lexicon(), lang))
    # Row ids and verdicts only, never texts: the corpus holds test-split rows that must not be read while tuning.
    assert not changes, f"{len(changes)} {lang} rows fire other categories (row id: golden -> now):\n" + \
        "\n".join(changes[:40])


@pytest.mark.parametrize("lang", match_golden.LANGS)
def test_matches_equal_the_golden_digests(golden: dict[str, dict[str, list[str]]], lang: str) -> None:
    lexicon = default_lexicon()
    texts = match_golden.corpus_texts(lang)
    expected = golden[lang]
    assert len(expected["rows"]) == len(texts), "the corpus changed: regenerate the golden file (see match_golden.py)"
    changed = [i for i, (t, want) in enumerate(zip(texts, expected["rows"]))
               if match_golden.digest(lexicon, t) != want]
    # Row numbers only, never texts: the corpus holds test-split rows that must not be read while tuning.
    assert not changed, f"{len(changed)} {lang} rows match differently, first row numbers: {changed[:10]}"
    long_texts = match_golden.blocks(texts, lang)
    changed_blocks = [i for i, (t, want) in enumerate(zip(long_texts, expected["blocks"]))
                      if match_golden.digest(lexicon, t) != want]
    assert not changed_blocks, f"{lang} blocks of {match_golden.BLOCK_ROWS} rows match differently: {changed_blocks[:10]}"


def test_the_digest_sees_a_changed_result(golden: dict[str, dict[str, list[str]]]) -> None:
    # guards against a digest that ignores what it hashes: a harmful row and a benign one differ
    lexicon = default_lexicon()
    assert match_golden.digest(lexicon, "你个傻逼") != match_golden.digest(lexicon, "今天天气很好")
    assert len(set(golden["zh"]["rows"])) > 1000
    assert len(golden["zh"]["categories"]) > 1000 and len(golden["en"]["categories"]) > 1000


def test_category_changes_name_each_changed_row_both_ways() -> None:
    assert match_golden.category_changes({"a": ["hate"], "b": ["spam"]}, {"b": ["spam"], "c": ["violence"]}) == \
        ["a: ['hate'] -> []", "c: [] -> ['violence']"]
