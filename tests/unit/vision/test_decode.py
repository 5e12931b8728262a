"""services/vision/decode.py: per-item outcomes for a batch of encoded images."""

from __future__ import annotations

import pytest

from services.common.image_decode import ImageLimits
from services.vision.decode import DecodedImage, RejectedImage, decode_batch, decode_item


def test_decoded_item_keeps_header_facts(china_jpeg: bytes) -> None:
    outcome = decode_item(china_jpeg)
    assert isinstance(outcome, DecodedImage)
    assert (outcome.format, outcome.width, outcome.height, outcome.rgb.shape) == ("JPEG", 640, 427, (427, 640, 3))


def test_rejections_are_values_not_exceptions(china_jpeg: bytes) -> None:
    outcomes = decode_batch([b"", china_jpeg, b"junk"], ImageLimits())
    assert [type(o) for o in outcomes] == [RejectedImage, DecodedImage, RejectedImage]
    first = outcomes[0]
    assert isinstance(first, RejectedImage) and "empty" in first.reason


def test_limits_are_applied(china_jpeg: bytes) -> None:
    outcome = decode_item(china_jpeg, ImageLimits(max_side=512))
    assert isinstance(outcome, RejectedImage) and "640x427" in outcome.reason


def test_rejected_image_needs_a_reason() -> None:
    with pytest.raises(ValueError, match="reason"):
        RejectedImage("")
