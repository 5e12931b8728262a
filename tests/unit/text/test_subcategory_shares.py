"""Subcategory shares from both text models (text contract v3): which kind of its category a text is."""

from __future__ import annotations

import json

import numpy as np
import pytest

from services.common.contracts import text as contract
from services.common.taxonomy import MODELLED_SUBCATEGORIES
from services.text.model import TextModerationModel
from services.text.semantic import TextSemanticModel
from services.text.minors import minor_references
from services.text.subcategories import SHARE_COLUMNS, subcategory_shares

#: (text, the kind it is, a kind of the same category it is not); written for these tests, not corpus rows.
KINDS = [
    ("honestly i'm done. i've said goodbye to the people who matter and tonight is the night i end it",
     "SELF_HARM_INTENT", "SELF_HARM_ENCOURAGEMENT"),
    ("lol you lost again? just go kill yourself already, the world would be better off",
     "SELF_HARM_ENCOURAGEMENT", "SELF_HARM_INTENT"),
    ("you'd better watch yourself walking home, i know the route and i'll be waiting with a knife",
     "VIOLENCE_THREAT", "VIOLENCE_GRAPHIC"),
    ("the footage showed his skull split open on the pavement, brains and blood pooled around the body",
     "VIOLENCE_GRAPHIC", "VIOLENCE_THREAT"),
]


def batch(*texts: str) -> dict[str, np.ndarray]:
    return {"TEXT": np.array([[t.encode("utf-8")] for t in texts], dtype=object)}


@pytest.fixture(params=["fast", "semantic"])
def model(request: pytest.FixtureRequest, text_model: TextModerationModel,
          semantic_model: TextSemanticModel) -> TextModerationModel | TextSemanticModel:
    return text_model if request.param == "fast" else semantic_model


def test_each_kind_outshares_its_sibling(model: TextModerationModel | TextSemanticModel) -> None:
    out = model.infer(batch(*(text for text, _, _ in KINDS)))
    for index, (text, kind, other) in enumerate(KINDS):
        assert float(out[kind][index, 0]) > float(out[other][index, 0]), (model.name, text)
    assert all(out[name].shape == (len(KINDS), 1) and out[name].dtype == np.float32
               for name in contract.SUBCATEGORY_OUTPUTS)
    assert float(out["SELF_HARM_INTENT"][0, 0]) >= 0.5 and float(out["SELF_HARM_ENCOURAGEMENT"][1, 0]) >= 0.5


def test_chinese_gets_no_head_shares_and_a_reference_to_a_minor_is_the_minors_evidence(
        model: TextModerationModel | TextSemanticModel) -> None:
    text = "she says she's 14 but sends pics"
    out = model.infer(batch("我不想活了，今晚就结束这一切", text))
    assert all(float(out[name][0, 0]) == 0.0 for name in contract.SUBCATEGORY_OUTPUTS)
    assert float(out["SEXUAL_MINORS"][1, 0]) == 1.0
    spans = [s for s in json.loads(out[contract.EVIDENCE][1, 0]) if s["category"] == "sexual/minors"]
    assert [(text[s["start"]:s["end"]], s["source"]) for s in spans] == [("14", "minor_reference")]


def test_shares_count_the_heads_only_where_the_english_heads_read_the_text() -> None:
    heads = np.full((2, len(MODELLED_SUBCATEGORIES)), 0.75, np.float32)
    shares = subcategory_shares(heads, [minor_references("i will find you"), minor_references("a 12 year old")],
                                [True, False])
    assert shares.shape == (2, len(contract.SUBCATEGORY_OUTPUTS))
    assert shares[0, SHARE_COLUMNS["violence/threat"]] == 0.75 and shares[0, SHARE_COLUMNS["sexual/minors"]] == 0.0
    assert shares[1, SHARE_COLUMNS["violence/threat"]] == 0.0 and shares[1, SHARE_COLUMNS["sexual/minors"]] == 1.0
