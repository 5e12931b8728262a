"""docs/taxonomy.md mirrors services/common/taxonomy.py; the taxonomy's own invariants."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.common.contracts import text as text_contract
from services.common.taxonomy import (CATEGORIES, IMAGE_CATEGORIES, LLAMA_GUARD_3, MODELLED_SUBCATEGORIES,
                                      SUBCATEGORIES, TEXT_CATEGORIES, Category, Subcategory, is_custom_category,
                                      subcategories_of)

DOC = Path(__file__).resolve().parents[3] / "docs" / "taxonomy.md"


def _table(heading: str) -> dict[str, list[str]]:
    """Rows of the first table under `## heading`, keyed by the first cell without backticks."""
    lines = DOC.read_text(encoding="utf-8").split(f"## {heading}\n", 1)[1].splitlines()
    rows = [line for line in lines[:next((i for i, l in enumerate(lines) if l.startswith("## ")), len(lines))]
            if line.startswith("|")][2:]
    cells = [[cell.strip() for cell in row.strip("|").split("|")] for row in rows]
    return {row[0].strip("`"): row[1:] for row in cells}


def _llama(codes: tuple[str, ...]) -> str:
    return ", ".join(codes) if codes else "(none)"


def test_doc_category_table_matches_the_module() -> None:
    table = _table("Categories")
    assert set(table) - {"custom.<name>"} == set(CATEGORIES)
    for name, category in CATEGORIES.items():
        modalities, description, azure, openai, llama = table[name]
        assert modalities == ", ".join(category.modalities), name
        assert description == category.description, name
        assert (azure, openai, llama) == (category.azure, category.openai, _llama(category.llama_guard)), name


def test_doc_signals_table_matches_the_module() -> None:
    table = _table("Signals")
    assert set(table) == set(CATEGORIES)
    for name, category in CATEGORIES.items():
        assert table[name] == ["; ".join(category.signals)], name


def test_text_categories_are_the_contract_score_outputs_in_order() -> None:
    assert TEXT_CATEGORIES == ("harassment", "hate", "violence", "self_harm", "sexual", "profanity", "spam")
    assert tuple(text_contract.SCORE_OUTPUTS.values()) == TEXT_CATEGORIES
    assert IMAGE_CATEGORIES == ("violence", "sexual")


def test_every_llama_guard_code_is_s1_to_s14() -> None:
    assert sorted(LLAMA_GUARD_3, key=lambda c: int(c[1:])) == [f"S{i}" for i in range(1, 15)]
    with pytest.raises(ValueError, match="S15"):
        Category("x", ("text",), "", (), "", "", ("S15",))
    with pytest.raises(ValueError, match="modalities"):
        Category("x", ("audio",), "", (), "", "", ())


def test_custom_categories() -> None:
    assert is_custom_category("custom.brand")
    assert not is_custom_category("custom.") and not is_custom_category("hate")


def test_doc_subcategory_table_matches_the_module() -> None:
    table = _table("Subcategories")
    assert set(table) == set(SUBCATEGORIES)
    for name, kind in SUBCATEGORIES.items():
        assert table[name] == [kind.description, kind.default_action, kind.floor or "(none)", kind.openai, kind.azure,
                               ", ".join(kind.llama_guard), kind.scored_by], name


def test_subcategories_belong_to_their_parent_and_the_contract_outputs_name_them_all() -> None:
    assert [s.name for s in subcategories_of("self_harm")] == ["self_harm/intent", "self_harm/instructions",
                                                               "self_harm/encouragement"]
    assert all(s.parent in TEXT_CATEGORIES for s in SUBCATEGORIES.values())
    assert tuple(text_contract.SUBCATEGORY_OUTPUTS.values()) == tuple(SUBCATEGORIES)
    assert "SELF_HARM_INTENT" in text_contract.SUBCATEGORY_OUTPUTS and "SEXUAL_MINORS" in text_contract.SUBCATEGORY_OUTPUTS
    assert MODELLED_SUBCATEGORIES == tuple(n for n in SUBCATEGORIES if n != "sexual/minors")
    assert SUBCATEGORIES["sexual/minors"].floor == "review"
    with pytest.raises(ValueError, match="<category>/<kind>"):
        Subcategory("cheating/exams", "", "block", "", "", ())
    with pytest.raises(ValueError, match="default_action"):
        Subcategory("hate/x", "", "delete", "", "", ())
