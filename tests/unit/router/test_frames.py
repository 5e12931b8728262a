"""Animated images judged on a sample of their frames (services/router/frames.py), with real GIF, WebP and APNG
files written by Pillow."""

from __future__ import annotations

import asyncio
import io

import numpy as np
import pytest
from PIL import Image, ImageDraw

from bench.render import render_photo_like
from services.common.errors import InvalidRequestError, LimitExceededError
from services.common.image_decode import inspect_image
from services.router.config import RequestLimits
from services.router.fusion import (ImageScoreEvidence, MatchEvidence, OcrLineEvidence, OcrLineFinding, TextSpanEvidence,
                                    Verdict)
from services.router.frames import expand_animations, pick_distinct, sample_frames, with_frames
from services.router.validation import ImagePart, RawPart, TextPart, validate_item

GREY = (128, 128, 128)


def animation(fmt: str, count: int, marked: dict[int, tuple[int, int, int]] | None = None,
              size: tuple[int, int] = (64, 48)) -> bytes:
    """`count` grey frames with a little noise of their own (as a camera's, so no writer merges them as
    copies); frame i in `marked` carries a square of that colour."""
    frames = []
    rng = np.random.default_rng(count)
    for index in range(count):
        noise = rng.integers(-2, 3, (size[1], size[0], 1))
        frame = Image.fromarray((np.full((size[1], size[0], 3), GREY) + noise).astype(np.uint8))
        if marked and index in marked:
            ImageDraw.Draw(frame).rectangle((8, 8, 40, 40), fill=marked[index])
        frames.append(frame)
    out = io.BytesIO()
    extra = {"lossless": True} if fmt == "WEBP" else {}  # lossy WebP smooths the noise away and merges the frames
    frames[0].save(out, fmt, save_all=True, append_images=frames[1:], duration=40, loop=0, **extra)
    return out.getvalue()


def pixel(data: bytes, at: tuple[int, int] = (20, 20)) -> tuple[int, ...]:
    with Image.open(io.BytesIO(data)) as image:
        return tuple(image.convert("RGB").getpixel(at))  # type: ignore[arg-type]


def test_the_first_frame_then_the_most_different_are_kept() -> None:
    flat, bright, dim = np.zeros((4, 4)), np.full((4, 4), 200.0), np.full((4, 4), 60.0)
    frames = np.stack([flat, flat, dim, flat, bright, flat, dim])
    assert pick_distinct(frames, 8) == [0, 2, 4]          # copies of kept frames add nothing
    assert pick_distinct(frames, 2) == [0, 4]             # the farthest first
    assert pick_distinct(frames, 1) == [0]
    assert pick_distinct(np.stack([flat] * 50), 8) == [0]  # a still animation is one frame
    ramp = np.stack([np.full((4, 4), float(i)) for i in range(100)])
    assert pick_distinct(ramp, 3) == [0, 49, 99]          # spread over a slow change (ties: earliest)
    assert pick_distinct(np.zeros((0, 4, 4)), 8) == []


@pytest.mark.parametrize("fmt", ["GIF", "WEBP", "PNG"])
def test_a_frame_hidden_among_copies_is_kept_and_sent_as_a_still(fmt: str) -> None:
    data = animation(fmt, 40, {23: (0, 0, 0)})
    frames = sample_frames(data, 8, 10 * 1024 * 1024)
    assert [f.index for f in frames] == [0, 23]
    for frame in frames:
        header = inspect_image(frame.data)  # the modality services' own check: a still image they take
        assert (header.format, header.width, header.height, header.animated) == ("PNG", 64, 48, False)
    assert abs(pixel(frames[0].data)[0] - GREY[0]) <= 8 and pixel(frames[1].data) == (0, 0, 0)


@pytest.mark.parametrize("fmt, options", [("GIF", {}), ("WEBP", {"quality": 60})])
def test_a_short_caption_in_one_frame_of_a_noisy_clip_is_kept(fmt: str, options: dict[str, int]) -> None:
    # a photo with camera noise in every frame; frame 5 alone carries a caption in small type (80 x 11 pixels
    # of a 500 x 500 frame): a mean over the whole frame cannot tell it from the noise, a block can
    base = np.asarray(Image.open(io.BytesIO(render_photo_like((500, 500), seed=3))).convert("RGB"), dtype=np.int16)
    rng = np.random.default_rng(1)
    frames = []
    for index in range(12):
        frame = Image.fromarray(np.clip(base + rng.integers(-6, 7, base.shape), 0, 255).astype(np.uint8))
        if index == 5:
            ImageDraw.Draw(frame).text((200, 300), "kill them all", fill=(255, 255, 255))
        frames.append(frame)
    out = io.BytesIO()
    frames[0].save(out, fmt, save_all=True, append_images=frames[1:], duration=40, loop=0, **options)
    assert [f.index for f in sample_frames(out.getvalue(), 8, 10 * 1024 * 1024)] == [0, 5]


def test_at_most_the_sample_size_of_frames_is_kept() -> None:
    marks = {i: (i * 6, 255 - i * 6, (i * 40) % 256) for i in range(1, 40)}
    frames = sample_frames(animation("WEBP", 40, marks), 5, 10 * 1024 * 1024)
    assert len(frames) == 5 and frames[0].index == 0


def test_a_frame_over_the_byte_limit_goes_as_jpeg_or_is_refused() -> None:
    noise = np.random.default_rng(0).integers(0, 256, (48, 64, 3), dtype=np.uint8)
    out = io.BytesIO()
    first = Image.fromarray(noise)
    first.save(out, "WEBP", save_all=True, append_images=[Image.new("RGB", (64, 48), GREY)], lossless=True)
    png_size = len(sample_frames(out.getvalue(), 8, 10 * 1024 * 1024)[0].data)
    frames = sample_frames(out.getvalue(), 8, png_size - 1)
    assert frames[0].format == "JPEG" and inspect_image(frames[0].data).format == "JPEG"
    with pytest.raises(LimitExceededError, match="bytes as a still image; the limit is 100 bytes"):
        sample_frames(out.getvalue(), 8, 100)


def test_an_item_gets_its_frames_as_parts_and_the_evidence_names_the_frame() -> None:
    limits = RequestLimits()
    gif = animation("GIF", 30, {7: (0, 0, 0), 19: (255, 255, 255)})
    item = validate_item("i", [RawPart("hello", None), RawPart(None, gif), RawPart(None, animation("PNG", 1))], limits)
    expanded, frames = asyncio.run(expand_animations(item, limits))
    assert [(type(p).__name__, p.index) for p in expanded.parts] == [
        ("TextPart", 0), ("ImagePart", 1), ("ImagePart", 3), ("ImagePart", 4), ("ImagePart", 2)]
    assert frames == {1: (1, 0), 3: (1, 7), 4: (1, 19)}
    assert isinstance(expanded.parts[0], TextPart) and all(not p.header.animated for p in expanded.images)
    assert expanded.images[-1].data == item.images[-1].data  # a still part goes on as it came
    line = OcrLineFinding(4, 0, "hidden words", 0.9, ((0, 0), (9, 0), (9, 9), (0, 9)))
    verdict = Verdict("block", [], [TextSpanEvidence("harassment", 4, 0, 6, "hidden", ocr_line=0),
                                    OcrLineEvidence("harassment", 4, line), ImageScoreEvidence("sexual", 3, "nsfw", {"sexual": 0.9}),
                                    MatchEvidence("spam", 1, "bank", 2, "pdq", 3, "c-1"),
                                    TextSpanEvidence("profanity", 0, 0, 5, "hello")], [])
    located = with_frames(verdict, frames).evidence
    assert [(e.part_index, e.frame) for e in located] == [(1, 19), (1, 19), (1, 7), (1, 0), (0, 0)]
    assert isinstance(located[1], OcrLineEvidence) and located[1].line.part_index == 1
    assert with_frames(verdict, {}) is verdict


def test_an_item_without_animations_comes_back_as_it_is() -> None:
    item = validate_item("i", [RawPart("hello", None)], RequestLimits())
    assert asyncio.run(expand_animations(item, RequestLimits())) == (item, {})


def test_frames_that_cannot_be_decoded_are_refused_naming_the_part() -> None:
    data = animation("GIF", 10, {5: (0, 0, 0)})
    item = validate_item("i", [RawPart(None, data[:len(data) // 2])], RequestLimits())
    assert isinstance(item.parts[0], ImagePart)
    with pytest.raises(InvalidRequestError, match=r"^items\[2\].parts\[0\].image: animation frames are corrupt or truncated"):
        asyncio.run(expand_animations(item, RequestLimits(), "items[2]"))
