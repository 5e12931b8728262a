"""Request validation: messages name the field; size limits give the limit."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from services.common.errors import InvalidRequestError, LimitExceededError
from services.router.config import RequestLimits
from services.router.validation import ImagePart, RawPart, TextPart, validate_item

LIMITS = RequestLimits(max_text_chars=10, max_parts_per_item=3, max_image_bytes=50_000, max_item_id_chars=8)


def png(size: tuple[int, int] = (8, 8)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, "white").save(buffer, "PNG")
    return buffer.getvalue()


def animated_webp() -> bytes:
    buffer = io.BytesIO()
    frames = [Image.new("RGB", (8, 8), colour) for colour in ("white", "red")]
    frames[0].save(buffer, "WEBP", save_all=True, append_images=frames[1:], duration=100, loop=0)
    return buffer.getvalue()


def test_valid_item_keeps_part_indexes() -> None:
    item = validate_item("id1", [RawPart("hello", None), RawPart(None, png())], LIMITS)
    assert isinstance(item.parts[0], TextPart) and isinstance(item.parts[1], ImagePart)
    assert item.images[0].index == 1 and item.images[0].header.format == "PNG"


@pytest.mark.parametrize("parts, error, message", [
    ([], InvalidRequestError, "item.parts is empty"),
    ([RawPart("  ", None)], InvalidRequestError, "item.parts[0].text is empty"),
    ([RawPart(None, None)], InvalidRequestError, "item.parts[0] has no content"),
    ([RawPart("x" * 11, None)], LimitExceededError, "11 characters; the limit is 10"),
    ([RawPart("a", None)] * 4, LimitExceededError, "4 parts; the limit is 3"),
    ([RawPart("ok", None), RawPart(None, b"\x89PNG garbage")], InvalidRequestError, "item.parts[1].image: image could not be decoded"),
    ([RawPart(None, b"x" * 50_001)], LimitExceededError, "50001 bytes; the limit is 50000 bytes"),
])
def test_bad_items_are_rejected_naming_the_part(parts: list[RawPart], error: type, message: str) -> None:
    with pytest.raises(error) as caught:
        validate_item("id", parts, LIMITS)
    assert message in str(caught.value)


def test_long_item_id_is_rejected_with_the_limit() -> None:
    with pytest.raises(LimitExceededError, match="the limit is 8"):
        validate_item("123456789", [RawPart("hi", None)], LIMITS, "items[3]")


def gif(frames: int, size: tuple[int, int] = (8, 8)) -> bytes:
    buffer = io.BytesIO()
    images = [Image.new("RGB", size, (i % 256, 0, 0)) for i in range(frames)]
    images[0].save(buffer, "GIF", save_all=True, append_images=images[1:], duration=40, loop=0)
    return buffer.getvalue()


def test_animations_are_accepted_and_marked_for_their_frames() -> None:
    item = validate_item("id", [RawPart(None, animated_webp()), RawPart(None, gif(3)), RawPart(None, png())], LIMITS)
    assert [(p.header.format, p.header.frames, p.header.animated) for p in item.images] == [
        ("WEBP", 2, True), ("GIF", 3, True), ("PNG", 1, False)]
    one_frame_gif = validate_item("id", [RawPart(None, gif(1))], LIMITS).images[0].header
    assert (one_frame_gif.frames, one_frame_gif.animated) == (1, True)  # a GIF still goes on as a PNG frame


def test_a_frame_bomb_is_refused_from_the_header_naming_the_limit() -> None:
    few = RequestLimits(max_animation_frames=20, max_animation_pixels=10_000)
    with pytest.raises(LimitExceededError, match=r"^item.parts\[0\].image is an animation of 21 frames; the limit is 20 "
                                                 r"\(limits.max_animation_frames\)"):
        validate_item("id", [RawPart(None, gif(21))], few)
    with pytest.raises(LimitExceededError, match=r"20 frames of 25x25: 12500 pixels to decode; the limit is 10000 "
                                                 r"\(limits.max_animation_pixels\)"):
        validate_item("id", [RawPart(None, gif(20, (25, 25)))], few)
    assert validate_item("id", [RawPart(None, gif(20, (22, 22)))], few).images[0].header.frames == 20
