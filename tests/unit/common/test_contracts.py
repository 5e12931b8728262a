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


def test_text_row_decodes_scores_and_hits() -> None:
    hit = {"category": "profanity", "term": "idiot", "severity": 2, "start": 4, "end": 9, "text": "idiot", "source": "x"}
    row = text.decode_row({"TOXICITY": _float(0.75), "SPAM": _float(0.25), "MATCHES": _bytes(text.encode_matches([hit]))})
    assert row.scores == {"hate": 0.75, "spam": 0.25}
    assert row.matches == (text.LexiconHit("profanity", "idiot", 2, 4, 9, "idiot", "x"),)
    assert row.matches[0].to_json() == hit


@pytest.mark.parametrize("matches", [b"{}", b"not json", b'[{"category": "x"}]', b'[{"category": "x", "term": "t", '
                                     b'"severity": "high", "start": 0, "end": 1, "text": "t"}]'])
def test_text_row_with_malformed_matches_is_refused(matches: bytes) -> None:
    with pytest.raises(MalformedRowError, match="MATCHES"):
        text.decode_row({"TOXICITY": _float(0.1), "SPAM": _float(0.1), "MATCHES": _bytes(matches)})


def test_text_row_missing_a_score_is_refused() -> None:
    with pytest.raises(MalformedRowError, match="SPAM"):
        text.decode_row({"TOXICITY": _float(0.1), "MATCHES": _bytes(b"[]")})


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
    from services.vision.model import ImageSafetyModel

    assert tuple(TextModerationModel.outputs) == text.OUTPUTS and tuple(TextModerationModel.inputs) == (text.INPUT,)
    assert tuple(ImageSafetyModel.outputs) == vision.OUTPUTS and tuple(ImageSafetyModel.inputs) == (vision.INPUT,)
    assert tuple(OcrModel.outputs) == ocr.OUTPUTS and tuple(OcrModel.inputs) == (ocr.INPUT,)
