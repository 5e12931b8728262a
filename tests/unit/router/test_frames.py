"""Animated images judged on a sample of their frames (services/router/frames.py), with real GIF, WebP and APNG
files written by Pillow; among them the tricks an outside review tried (decoy frames, colour-only text, a
light caption on a large frame, a frame larger than the screen)."""

from __future__ import annotations

import asyncio
import io
import struct
import threading
import time
from typing import Any

import numpy as np
import pytest
from PIL import Image, ImageDraw

from bench.render import render_photo_like
from services.common.errors import DeadlineExceededError, ImageRejectedError, InvalidRequestError, LimitExceededError
from services.common.image_decode import ImageHeader, inspect_image
from services.router.config import RequestLimits
from services.router.frames import FrameDecoder, FrameLimits, pick_frames, sample_frames, thumbnail_side, with_frames
from services.router.fusion import (ImageScoreEvidence, MatchEvidence, OcrLineEvidence, OcrLineFinding, TextSpanEvidence,
                                    Verdict)
from services.router.validation import ImagePart, RawPart, TextPart, ValidItem, validate_item

GREY = (128, 128, 128)
LIMITS = FrameLimits.of(RequestLimits())


def save(frames: list[Image.Image], fmt: str, durations: int | list[int] = 40, **options: Any) -> bytes:
    out = io.BytesIO()
    frames[0].save(out, fmt, save_all=True, append_images=frames[1:], duration=durations, loop=0, **options)
    return out.getvalue()


def animation(fmt: str, count: int, marked: dict[int, tuple[int, int, int]] | None = None,
              size: tuple[int, int] = (64, 48)) -> bytes:
    """`count` grey frames, each a copy but for one corner pixel a shade off (so no writer merges them, and no
    comparison tells them apart); frame i in `marked` carries a square of that colour."""
    frames = []
    for index in range(count):
        frame = Image.new("RGB", size, GREY)
        frame.putpixel((0, 0), (GREY[0] + index % 3, GREY[1], GREY[2]))
        if marked and index in marked:
            ImageDraw.Draw(frame).rectangle((8, 8, 40, 40), fill=marked[index])
        frames.append(frame)
    return save(frames, fmt, **({"lossless": True} if fmt == "WEBP" else {}))  # lossy WebP would merge the copies


def pixel(data: bytes, at: tuple[int, int] = (20, 20)) -> tuple[int, ...]:
    with Image.open(io.BytesIO(data)) as image:
        return tuple(image.convert("RGB").getpixel(at))  # type: ignore[arg-type]


def kept(data: bytes, limits: FrameLimits = LIMITS) -> list[int]:
    return [f.index for f in sample_frames(data, limits)]


def test_the_first_frame_then_the_most_different_are_kept() -> None:
    flat, bright, dim = (np.full((4, 4, 1), v) for v in (0.0, 200.0, 60.0))
    frames = np.stack([flat, flat, dim, flat, bright, flat, dim])
    none = np.zeros(len(frames))
    assert pick_frames(frames, none, 8) == [0, 2, 4]  # copies of kept frames add nothing
    assert pick_frames(frames, none, 1) == [0]
    assert pick_frames(np.stack([flat] * 50), np.zeros(50), 8) == [0]  # a still animation is one frame
    ramp = np.stack([np.full((4, 4, 1), float(i)) for i in range(100)])
    assert pick_frames(ramp, np.zeros(100), 3) == [0, 50, 99]  # the middle of the loop, then the farthest
    assert pick_frames(np.zeros((0, 4, 4, 1)), np.zeros(0), 8) == []
    stop = threading.Event()
    stop.set()
    with pytest.raises(DeadlineExceededError):
        pick_frames(ramp, np.zeros(100), 8, stop)  # a comparison past the deadline stops


def flashes_then(held_frames: list[Image.Image], flashes: int = 7) -> list[Image.Image]:
    """A black frame, `flashes` brief frames each unlike every other, then `held_frames`."""
    frames = [Image.new("RGB", (96, 96), (0, 0, 0))]
    for index in range(1, flashes + 1):
        flash = Image.new("RGB", (96, 96), (0, 0, 0))
        ImageDraw.Draw(flash).rectangle((index * 10, 0, index * 10 + 9, 95), fill=(255, 255, 255))
        frames.append(flash)
    return frames + held_frames


def held(jitter: int = 0) -> Image.Image:
    frame = Image.new("RGB", (96, 96), (0, 0, 0))
    ImageDraw.Draw(frame).text((5 + jitter, 40), "held words", fill=(255, 255, 255))
    return frame


def test_a_scene_that_holds_the_screen_is_kept_however_it_is_cut_and_whatever_flashes_around_it() -> None:
    # one frame shown for 5 s after seven 20 ms flashes
    assert 8 in kept(save(flashes_then([held()]), "GIF", [500] + [20] * 7 + [5000]))
    # the same scene cut into 50 frames of 100 ms, each moved a pixel
    scene = [held(jitter=i % 5) for i in range(50)]
    assert any(i >= 8 for i in kept(save(flashes_then(scene), "GIF", [500] + [20] * 7 + [100] * 50)))
    # delays of 0 ms: browsers show each for 100 ms, so the scene still holds most of the loop
    assert any(i >= 8 for i in kept(save(flashes_then(scene), "GIF", [0] * 58)))


@pytest.mark.parametrize("fmt, options", [("GIF", {}), ("WEBP", {"lossless": True})])
def test_text_that_differs_only_in_colour_is_a_new_frame(fmt: str, options: dict[str, Any]) -> None:
    frames = [Image.new("RGB", (300, 200), (0, 130, 0)) for _ in range(6)]
    ImageDraw.Draw(frames[4]).text((20, 80), "red words on green", fill=(255, 0, 1))  # the same brightness
    assert len(sample_frames(save(frames, fmt, **options), LIMITS)) == 2


@pytest.mark.parametrize("fmt", ["GIF", "WEBP"])
def test_a_light_caption_on_a_large_clean_frame_is_a_new_frame(fmt: str) -> None:
    frames = [Image.new("RGB", (2000, 1500), GREY) for _ in range(6)]
    ImageDraw.Draw(frames[3]).text((500, 700), "light grey caption here", fill=(160, 160, 160))
    assert len(sample_frames(save(frames, fmt), LIMITS)) == 2


@pytest.mark.parametrize("fmt", ["GIF", "WEBP", "PNG"])
def test_a_frame_hidden_among_copies_is_kept_and_sent_as_a_still(fmt: str) -> None:
    sample = sample_frames(animation(fmt, 40, {23: (0, 0, 0)}), LIMITS)
    assert [f.index for f in sample][0] == 0 and 23 in [f.index for f in sample]
    for frame in sample:
        header = inspect_image(frame.data)  # the modality services' own check: a still image they take
        assert (header.format, header.width, header.height, header.animated) == ("PNG", 64, 48, False)
    marked = next(f for f in sample if f.index == 23)
    assert abs(pixel(sample[0].data)[0] - GREY[0]) <= 8 and pixel(marked.data) == (0, 0, 0)


@pytest.mark.parametrize("fmt, options", [("GIF", {}), ("WEBP", {"quality": 60})])
def test_a_short_caption_in_one_frame_of_a_noisy_clip_is_kept(fmt: str, options: dict[str, Any]) -> None:
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
    assert {0, 5} <= set(kept(save(frames, fmt, **options)))  # the caption first; grain fills the rest


def test_at_most_the_sample_size_of_frames_is_kept() -> None:
    marks = {i: (i * 6, 255 - i * 6, (i * 40) % 256) for i in range(1, 40)}
    frames = sample_frames(animation("WEBP", 40, marks), FrameLimits.of(RequestLimits(frames_sampled=5)))
    assert len(frames) == 5 and frames[0].index == 0


def test_thumbnails_grow_with_the_frame_and_stay_within_their_budget() -> None:
    assert thumbnail_side(64, 48) == 64 and thumbnail_side(500, 300) == 128
    assert thumbnail_side(8000, 4000) == 500 and thumbnail_side(200, 200, frames=1000) == 50


def gif_with_a_frame_larger_than_its_screen(side: int) -> bytes:
    """A 16 x 16 screen, then a frame of `side` x `side` (its descriptor says so; the decoder would grow the canvas)."""
    small = save([Image.new("RGB", (16, 16), (255, 255, 255)), Image.new("RGB", (16, 16), (0, 0, 0))], "GIF")
    at = small.rindex(b",")  # the second frame's image descriptor
    return small[:at + 5] + struct.pack("<HH", side, side) + small[at + 9:]


def test_a_frame_larger_than_the_screen_is_refused_before_it_is_decoded() -> None:
    bomb = gif_with_a_frame_larger_than_its_screen(9000)
    with pytest.raises(InvalidRequestError, match=r"image is 9000x9000; each side must be 1..8192 pixels"):
        validate_item("i", [RawPart(None, bomb)], RequestLimits())  # from the blocks, not the screen
    with pytest.raises(LimitExceededError, match=r"^frame 1 is 9000x9000 as decoded"):
        sample_frames(bomb, LIMITS)  # and again as decoded, were it to get there


def test_a_decode_past_its_deadline_stops_and_says_so() -> None:
    stop = threading.Event()
    stop.set()
    with pytest.raises(DeadlineExceededError):
        sample_frames(animation("GIF", 5, {3: (0, 0, 0)}), LIMITS, stop)
    item = validate_item("i", [RawPart(None, animation("GIF", 5, {3: (0, 0, 0)}))], RequestLimits())
    with pytest.raises(DeadlineExceededError, match=r"^item.parts\[0\].image: the deadline passed"):
        asyncio.run(FrameDecoder().expand(item, RequestLimits(), tenant="a", deadline=time.monotonic() - 1))


def test_a_tenants_animations_take_turns_and_the_router_refuses_past_its_bound() -> None:
    limits = RequestLimits()
    item = validate_item("i", [RawPart(None, animation("GIF", 30, {9: (0, 0, 0)}, size=(200, 150)))], limits)

    async def batch(decoder: FrameDecoder, count: int) -> list[object]:
        deadline = time.monotonic() + 60
        tries = [decoder.expand(item, limits, tenant="loud", deadline=deadline) for _ in range(count)]
        tries.append(decoder.expand(item, limits, tenant="quiet", deadline=deadline))
        return list(await asyncio.gather(*tries, return_exceptions=True))

    # more animations than a tenant's turns: they wait, none is refused (a batch of GIFs)
    assert not [o for o in asyncio.run(batch(FrameDecoder(threads=1, per_tenant=2), 6)) if isinstance(o, BaseException)]
    # past the router's bound: RESOURCE_EXHAUSTED with a retry delay
    outcomes = asyncio.run(batch(FrameDecoder(threads=1, per_tenant=2, max_waiting=3), 4))
    refused = [o for o in outcomes if isinstance(o, LimitExceededError)]
    assert len(refused) == 2 and refused[0].retry_after_s == 1.0 and "retry later" in str(refused[0])


def test_a_cancelled_caller_keeps_its_turn_until_its_thread_has_stopped() -> None:
    limits = RequestLimits()
    big = validate_item("i", [RawPart(None, animation("GIF", 200, {i: (i, 0, 0) for i in range(1, 200)},
                                                      size=(300, 300)))], limits)

    async def cancelled_then_other() -> None:
        decoder = FrameDecoder(threads=1, per_tenant=1)
        first = asyncio.ensure_future(decoder.expand(big, limits, tenant="a", deadline=time.monotonic() + 60))
        await asyncio.sleep(0.05)
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        turn = decoder._turns["a"]
        assert turn.locked()  # the thread still runs: the turn is not given back yet
        for _ in range(200):  # it stops at its next step, then gives the turn back
            if not turn.locked():
                break
            await asyncio.sleep(0.05)
        assert not turn.locked() and decoder._waiting == 0

    asyncio.run(cancelled_then_other())


def test_an_item_gets_its_frames_as_parts_and_the_evidence_names_the_frame() -> None:
    limits = RequestLimits()
    gif = animation("GIF", 30, {7: (0, 0, 0), 19: (255, 255, 255)})
    item = validate_item("i", [RawPart("hello", None), RawPart(None, gif), RawPart(None, animation("PNG", 1))], limits)
    expanded, frames = asyncio.run(FrameDecoder().expand(item, limits, tenant="a", deadline=time.monotonic() + 30))
    assert [(type(p).__name__, p.index) for p in expanded.parts] == [
        ("TextPart", 0), ("ImagePart", 1), ("ImagePart", 3), ("ImagePart", 4), ("ImagePart", 2)]
    assert frames == {1: (1, 0), 3: (1, 7), 4: (1, 19)}
    assert isinstance(expanded.parts[0], TextPart) and all(not p.header.animated for p in expanded.images)
    assert expanded.images[-1].data == item.images[-1].data  # a still part goes on as it came
    assert [p.field for p in expanded.images] == ["parts[1] frame 0", "parts[1] frame 7", "parts[1] frame 19", "parts[2]"]
    assert expanded.animations == (item.images[0],)  # the file as sent, matched by its exact hashes
    line = OcrLineFinding(4, 0, "hidden words", 0.9, ((0, 0), (9, 0), (9, 9), (0, 9)))
    verdict = Verdict("block", [], [TextSpanEvidence("harassment", 4, 0, 6, "hidden", ocr_line=0),
                                    OcrLineEvidence("harassment", 4, line), ImageScoreEvidence("sexual", 3, "nsfw", {"sexual": 0.9}),
                                    MatchEvidence("spam", 1, "bank", 2, "pdq", 3, "c-1"),
                                    TextSpanEvidence("profanity", 0, 0, 5, "hello")], [])
    located = with_frames(verdict, frames).evidence
    assert [(e.part_index, e.frame) for e in located] == [(1, 19), (1, 19), (1, 7), (1, 0), (0, 0)]
    assert isinstance(located[1], OcrLineEvidence) and located[1].line.part_index == 1
    assert with_frames(verdict, {}) is verdict


def test_an_items_animations_share_its_frame_budget() -> None:
    limits = RequestLimits(max_frames_per_item=6)
    marks = {i: (i * 25, 255 - i * 25, 0) for i in range(1, 8)}
    still_gif = save([Image.new("RGB", (8, 8), (1, 2, 3))], "GIF")
    parts = [RawPart(None, animation("GIF", 8, marks)) for _ in range(2)] + [RawPart(None, still_gif)] * 2
    item = validate_item("i", parts, limits)
    expanded, _ = asyncio.run(FrameDecoder().expand(item, limits, tenant="a", deadline=time.monotonic() + 30))
    # the two one-frame GIFs need one each; the two moving ones share the other four
    assert len(expanded.images) == 6 and sum(1 for p in expanded.images if p.origin and p.origin[0] == 0) == 2


def test_an_item_without_animations_comes_back_as_it_is() -> None:
    item = validate_item("i", [RawPart("hello", None)], RequestLimits())
    assert asyncio.run(FrameDecoder().expand(item, RequestLimits(), tenant="a", deadline=time.monotonic())) == (item, {})


def test_frames_that_cannot_be_decoded_are_refused_naming_the_part() -> None:
    data = animation("WEBP", 10, {5: (0, 0, 0)})
    # the header reads, the frames do not (validation passes a file truncated after its first frames)
    item = ValidItem("i", (ImagePart(0, data[:len(data) // 2], ImageHeader("WEBP", 64, 48, 10, True)),))
    with pytest.raises(InvalidRequestError, match=r"^items\[2\].parts\[0\].image: animation"):
        asyncio.run(FrameDecoder().expand(item, RequestLimits(), tenant="a", deadline=time.monotonic() + 30,
                                          where="items[2]"))


def test_frames_as_decoded_may_not_outnumber_those_counted_in_the_blocks() -> None:
    # a file built so that the blocks and the decoder disagree (the count from the blocks sizes the thumbnails)
    with pytest.raises(ImageRejectedError, match="its frames as decoded outnumber the 1 its blocks hold"):
        sample_frames(animation("GIF", 3, {2: (0, 0, 0)}), LIMITS, frames=1)


def test_one_tenant_cannot_take_the_routers_whole_bound() -> None:
    limits = RequestLimits()
    item = validate_item("i", [RawPart(None, animation("GIF", 30, {9: (0, 0, 0)}, size=(200, 150)))], limits)

    async def flood() -> list[object]:
        decoder = FrameDecoder(threads=1, per_tenant=1, max_waiting=64)
        deadline = time.monotonic() + 60
        tries = [decoder.expand(item, limits, tenant="loud", deadline=deadline) for _ in range(20)]
        tries.append(decoder.expand(item, limits, tenant="quiet", deadline=deadline))
        return list(await asyncio.gather(*tries, return_exceptions=True))

    outcomes = asyncio.run(flood())
    refused = [o for o in outcomes[:20] if isinstance(o, LimitExceededError)]
    assert len(refused) == 4 and "16 animations of this tenant are decoding or waiting" in str(refused[0])
    assert not isinstance(outcomes[20], BaseException)  # the other tenant is served


def test_a_turn_is_given_back_when_no_thread_takes_the_work() -> None:
    limits = RequestLimits()
    item = validate_item("i", [RawPart(None, animation("GIF", 5, {3: (0, 0, 0)}))], limits)

    async def after_close() -> None:
        decoder = FrameDecoder(per_tenant=1)
        decoder.close()
        with pytest.raises(RuntimeError):
            await decoder.expand(item, limits, tenant="a", deadline=time.monotonic() + 5)
        assert not decoder._turns["a"].locked() and decoder._waiting == 0

    asyncio.run(after_close())
