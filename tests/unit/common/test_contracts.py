"""Each modality's tensor contract: the models declare exactly it, and the router's typed decoding
accepts what the models produce and refuses rows that break the contract."""

from __future__ import annotations

import numpy as np
import pytest

from services.common.contracts import ocr, text, vision
from services.common.contracts.rows import MalformedRowError


def _bytes(value: bytes) -> np.ndarray:
    return np.array([value], dtype=object)


def _float(value: float) -> np.ndarray:
    return np.array([value], dtype=np.float32)


def _text_row(**overrides: np.ndarray) -> dict[str, np.ndarray]:
    row = {name: _float(0.0) for name in text.SCORE_OUTPUTS}
    row.update({"MATCHES": _bytes(b"[]"), "EVIDENCE": _bytes(b"[]"), "TARGET": _float(0.0)})
    row.update({name: _float(0.0) for name in text.SUBCATEGORY_OUTPUTS})
    row.update(overrides)
    return row


def test_text_contract_v3_declares_seven_categories_and_the_subcategory_shares() -> None:
    assert text.CATEGORIES == ("harassment", "hate", "violence", "self_harm", "sexual", "profanity", "spam")
    assert list(text.SCORE_OUTPUTS) == [c.upper() for c in text.CATEGORIES]
    names = [spec.name for spec in text.OUTPUTS]
    assert names[7:10] == ["MATCHES", "EVIDENCE", "TARGET"] and "TOXICITY" not in names
    assert names[10:] == ["SELF_HARM_INTENT", "SELF_HARM_INSTRUCTIONS", "SELF_HARM_ENCOURAGEMENT", "VIOLENCE_THREAT",
                          "VIOLENCE_GRAPHIC", "HARASSMENT_THREATENING", "HATE_THREATENING", "SEXUAL_MINORS"]
    assert text.ROUTER_OUTPUTS == tuple(names)
    assert text.MODEL_NAMES == ("text_moderation", "text_semantic")


def test_text_row_decodes_scores_hits_evidence_and_target() -> None:
    hit = {"category": "harassment", "term": "idiot", "severity": 2, "start": 4, "end": 9, "text": "idiot",
           "source": "rule:insult_you", "max_action": "review"}
    span = text.EvidenceSpan("harassment", 0, 9, 0.875, "rule:insult_you")
    row = text.decode_row(_text_row(HARASSMENT=_float(0.75), SPAM=_float(0.25), TARGET=_float(1.0),
                                    MATCHES=_bytes(text.encode_matches([hit])),
                                    EVIDENCE=_bytes(text.encode_evidence([span]))))
    assert row.scores == {"harassment": 0.75, "hate": 0.0, "violence": 0.0, "self_harm": 0.0, "sexual": 0.0,
                          "profanity": 0.0, "spam": 0.25}
    assert row.matches == (text.LexiconHit("harassment", "idiot", 2, 4, 9, "idiot", "rule:insult_you", "review"),)
    assert row.matches[0].to_json() == hit
    assert row.evidence == (span,) and row.target is True
    assert row.subcategories["self_harm/intent"] == 0.0 and set(row.subcategories) == set(text.SUBCATEGORY_OUTPUTS.values())


def test_text_row_decodes_the_subcategory_shares_and_a_row_without_them_is_malformed() -> None:
    row = text.decode_row(_text_row(SELF_HARM_INTENT=_float(0.875), SEXUAL_MINORS=_float(1.0)))
    assert row.subcategories["self_harm/intent"] == 0.875 and row.subcategories["sexual/minors"] == 1.0
    without = _text_row()
    del without["VIOLENCE_GRAPHIC"]
    with pytest.raises(MalformedRowError, match="VIOLENCE_GRAPHIC"):
        text.decode_row(without)


def test_a_hit_without_max_action_round_trips_without_the_key() -> None:
    hit = {"category": "profanity", "term": "shit", "severity": 1, "start": 0, "end": 4, "text": "shit", "source": "x"}
    row = text.decode_row(_text_row(MATCHES=_bytes(text.encode_matches([hit]))))
    assert row.matches[0].max_action is None and row.matches[0].to_json() == hit and row.target is False


@pytest.mark.parametrize("matches", [b"{}", b"not json", b'[{"category": "x"}]', b'[{"category": "x", "term": "t", '
                                     b'"severity": "high", "start": 0, "end": 1, "text": "t"}]',
                                     b'[{"category": "x", "term": "t", "severity": 1, "start": 0, "end": 1, '
                                     b'"text": "t", "max_action": "block"}]'])
def test_text_row_with_malformed_matches_is_refused(matches: bytes) -> None:
    with pytest.raises(MalformedRowError, match="MATCHES"):
        text.decode_row(_text_row(MATCHES=_bytes(matches)))


@pytest.mark.parametrize("evidence", [b"{}", b'[{"category": "x", "start": 0}]',
                                      b'[{"category": "x", "start": "a", "end": 1, "score": 1, "source": "s"}]'])
def test_text_row_with_malformed_evidence_is_refused(evidence: bytes) -> None:
    with pytest.raises(MalformedRowError, match="EVIDENCE"):
        text.decode_row(_text_row(EVIDENCE=_bytes(evidence)))


@pytest.mark.parametrize("missing", ["SPAM", "HARASSMENT", "TARGET", "EVIDENCE"])
def test_text_row_missing_an_output_is_refused(missing: str) -> None:
    row = _text_row()
    del row[missing]
    with pytest.raises(MalformedRowError, match=missing):
        text.decode_row(row)


def test_vision_row_and_router_outputs_skip_details() -> None:
    row = vision.decode_row({"SEXUAL": _float(0.5), "VIOLENCE": _float(0.0), "ERROR": _bytes(b"")})
    assert row == vision.VisionRow({"sexual": 0.5, "violence": 0.0}, "")
    assert "DETAILS" not in vision.ROUTER_OUTPUTS and "DETAILS" in [s.name for s in vision.OUTPUTS]
    assert vision.decode_row({"SEXUAL": _float(0), "VIOLENCE": _float(0), "ERROR": _bytes(b"too big")}).error == "too big"


def test_ocr_row_round_trips_lines() -> None:
    line = ocr.OcrLine("hello", 0.98, ((0, 0), (10, 0), (10, 5), (0, 5)))
    row = ocr.decode_row({"LINES": _bytes(ocr.encode_lines([line])), "ERROR": _bytes(b"")})
    assert row.lines == (line,) and row.error == ""
    with pytest.raises(MalformedRowError, match="LINES"):
        ocr.decode_row({"LINES": _bytes(b'[{"text": "x"}]'), "ERROR": _bytes(b"")})


def test_models_serve_exactly_their_contract() -> None:
    from services.ocr.model import OcrModel
    from services.text.model import TextModerationModel
    from services.text.semantic import TextSemanticModel
    from services.vision.model import ImageSafetyModel

    for model in (TextModerationModel, TextSemanticModel):
        assert tuple(model.outputs) == text.OUTPUTS and tuple(model.inputs) == (text.INPUT,)
    assert (TextModerationModel.name, TextSemanticModel.name) == text.MODEL_NAMES
    assert tuple(ImageSafetyModel.outputs) == vision.OUTPUTS and tuple(ImageSafetyModel.inputs) == (vision.INPUT,)
    assert tuple(OcrModel.outputs) == ocr.OUTPUTS and tuple(OcrModel.inputs) == (ocr.INPUT,)
