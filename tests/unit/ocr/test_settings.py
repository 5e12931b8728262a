from __future__ import annotations

from typing import Any

import pytest

from services.ocr.settings import OcrSettings


def test_defaults_follow_rapidocr_with_max_960_detector_limit() -> None:
    settings = OcrSettings()
    assert (settings.limit_type, settings.limit_side_len) == ("max", 960)
    assert (settings.det_thresh, settings.box_thresh, settings.unclip_ratio) == (0.3, 0.5, 1.6)
    assert settings.text_score == 0.5 and settings.use_cls


@pytest.mark.parametrize("field, value", [
    ("limit_side_len", 16), ("limit_type", "mid"), ("det_grouping", "stack"), ("det_thresh", 1.5),
    ("box_thresh", -0.1), ("text_score", 2.0), ("cls_thresh", -1.0), ("unclip_ratio", 0.0),
    ("rec_batch", 0), ("cls_batch", 0), ("rec_width_step", 0),
])
def test_rejects_bad_values_naming_the_field(field: str, value: Any) -> None:
    with pytest.raises(ValueError, match=field):
        OcrSettings(**{field: value})


def test_use_cls_must_be_bool() -> None:
    with pytest.raises(TypeError, match="use_cls"):
        OcrSettings(use_cls="yes")  # type: ignore[arg-type]
