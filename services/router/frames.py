"""Animated images (GIF, animated WebP, APNG) judged on a bounded sample of their frames (issue 42).

A viewer sees every frame of an animation; the modality services judge still images. The router checks an
animation's frame count from its header when it validates the request (`check_animation` in
services/router/validation.py: a frame bomb is refused before anything is queued), and after admission,
off the event loop, decodes its frames and keeps a sample (`sample_frames`, `pick_frames`):

1. the first frame (what a feed shows before it plays);
2. every frame shown for at least 1 / (`limits.frames_sampled` - 1) of the loop's time (so a frame that
   holds the screen is judged, however many brief frames surround it);
3. then the frames that differ most from every frame already kept (farthest-point sampling), until
   `limits.frames_sampled` frames are kept or no frame is left that differs from a kept one by more than
   the animation's own noise (`noise_threshold`).

Two frames are as far apart as their most different block of `CELL` x `CELL` pixels of colour thumbnails
(mean absolute difference, in any of R, G, B; thumbnails of at least 128 pixels a side, more for large
frames, so a block covers at most about 32 source pixels): a caption that shows in one frame counts as
much as a change of scene, and a difference of colour counts where brightness is equal. What counts as a
change is measured on each animation (`noise_threshold`: six times its typical block's change between
consecutive frames, between 1 and 12): grain, dithering and lossy re-encoding are not new frames; a light
caption on a clean frame is.

When distinct frames are left over (an animation with more scenes than the sample holds), the item is
degraded: a `frames` stage failure says how many were judged, and the policy's `failure.vision` mode
decides (open by default: answered and marked degraded; closed: REVIEW).

Bounds, beside the header's (`check_animation`): each frame as decoded (a GIF frame may be larger than the
screen its header declares) within `limits.max_image_side` and `max_image_pixels`, and the frames read so
far within `limits.max_animation_pixels`, checked before a frame's pixels are decoded (RESOURCE_EXHAUSTED
naming the limit). Decoding runs on `DECODE_THREADS` threads of its own (`FrameDecoder`): a tenant has at
most `PER_TENANT` animations decoding or waiting, the router `MAX_WAITING`; past either, RESOURCE_EXHAUSTED
(retry later); a decode past the item's deadline stops between frames.

Each kept frame goes on as its own still image (PNG; JPEG when the PNG would pass `limits.max_image_bytes`).
`FrameDecoder.expand` gives the item with each animated part replaced by its frames (the first frame keeps
the part's index; later frames get indexes past the item's parts) and the map back; `with_frames` puts the
part index and frame number back into the decision's evidence, so the response says which frame decided.

Example::

    item, frames = await decoder.expand(valid, limits, tenant="acme", deadline=deadline)
    ...                                             # the pipeline judges `item` as it judges any item
    verdict = with_frames(outcome.verdict, frames)  # evidence: part_index 0, frame 17
"""

from __future__ import annotations

import asyncio
import io
import math
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Iterator, Mapping

import numpy as np
from PIL import Image, ImageOps, ImageSequence

from services.common.errors import DeadlineExceededError, ImageRejectedError, InvalidRequestError, LimitExceededError
from services.common.image_decode import flatten_alpha
from services.router.config import RequestLimits
from services.router.fusion import Evidence, OcrLineEvidence, StageFailure, Verdict
from services.router.validation import ImagePart, Part, ValidItem

__all__ = ["CELL", "DECODE_THREADS", "MAX_DIFFERENCE", "MIN_DIFFERENCE", "MAX_WAITING", "PER_TENANT",
           "FRAMES_STAGE", "Frame", "FrameDecoder", "FrameLimits", "Sample", "block_distance", "pick_frames",
           "noise_threshold", "sample_frames", "thumbnail_side", "with_frames"]

#: Two frames differ by their most different CELL x CELL block of thumbnail pixels, a block covering at most
#: about SOURCE_BLOCK x SOURCE_BLOCK pixels of the frame (thumbnails of at least 128 pixels a side).
CELL = 2
SOURCE_BLOCK = 32
#: Thumbnail values (frames x side x side x 3) one animation may hold: past it the side shrinks.
THUMBNAIL_BUDGET = 24_000_000
#: A frame is new when it differs from every kept one by more than NOISE_FACTOR times the animation's own
#: noise (camera grain, dithering, lossy re-encoding: the median block's change between consecutive frames,
#: a change spread over the whole frame), within [MIN_DIFFERENCE, MAX_DIFFERENCE]. Measured (block mean
#: absolute difference, 0-255): grain in a GIF, median block 1.5, most different block up to 4.8; lossy WebP
#: 2.0 and 9.5; a short caption on those clips 22 and 44; a light-grey caption on a clean 2,000-pixel frame
#: 3.2 (its median block 0); red text on green of equal brightness 123.
NOISE_FACTOR = 6.0
MIN_DIFFERENCE = 1.0
MAX_DIFFERENCE = 12.0
#: Distinct frames counted beyond the sample, at most this many times the sample (the count is a report).
COUNT_FACTOR = 4
#: The stage a sample too small for the animation's distinct frames is reported under.
FRAMES_STAGE = "frames"
#: Animations decoded at once per router process, on threads of their own (so a flood of them waits its turn
#: instead of taking the threads the rest of the router runs blocking work on).
DECODE_THREADS = 2
#: Animations one tenant may have decoding or waiting; beyond, RESOURCE_EXHAUSTED.
PER_TENANT = 4
#: Animations decoding or waiting in all; beyond, RESOURCE_EXHAUSTED.
MAX_WAITING = 32
#: PNG compression for the frames sent on (1: fast; they are read once).
PNG_LEVEL = 1
#: JPEG quality when a frame's PNG is over the image byte limit.
JPEG_QUALITY = 92


@dataclass(frozen=True)
class FrameLimits:
    """What one animation may cost, from the router's request limits."""

    sampled: int
    max_bytes: int
    max_side: int
    max_pixels: int
    max_total_pixels: int

    @classmethod
    def of(cls, limits: RequestLimits) -> FrameLimits:
        return cls(limits.frames_sampled, limits.max_image_bytes, limits.max_image_side, limits.max_image_pixels,
                   limits.max_animation_pixels)


@dataclass(frozen=True)
class Frame:
    """One kept frame: its number in the animation (0 = first) and its still image bytes."""

    index: int
    data: bytes
    #: "PNG", or "JPEG" for a frame whose PNG was over the byte limit.
    format: str = "PNG"
    width: int = 0
    height: int = 0


@dataclass(frozen=True)
class Sample:
    """The kept frames of one animation, and how many distinct frames it has (kept or not)."""

    frames: list[Frame]
    distinct: int


def thumbnail_side(width: int, height: int, frames: int = 1) -> int:
    """The side of the thumbnails frames of `width` x `height` are compared on: enough that a CELL x CELL block
    covers at most about SOURCE_BLOCK source pixels, at least 128 (or the frame's own size), at most 512, and
    within THUMBNAIL_BUDGET over `frames` frames; a multiple of CELL.

    Example::

        >>> thumbnail_side(500, 300), thumbnail_side(4000, 3000), thumbnail_side(200, 200, frames=1000)
        (128, 250, 88)
    """
    longest = max(width, height)
    side = max(min(128, longest), math.ceil(longest * CELL / SOURCE_BLOCK))
    side = min(side, 512, int(math.sqrt(THUMBNAIL_BUDGET / (3 * max(frames, 1)))))
    return max(CELL, side - side % CELL)


def noise_threshold(thumbnails: np.ndarray) -> float:
    """The difference past which a frame of this animation is new (see NOISE_FACTOR)."""
    if len(thumbnails) < 2:
        return MIN_DIFFERENCE
    noise = float(np.median([np.median(_blocks(thumbnails[i:i + 1], thumbnails[i - 1]))
                             for i in range(1, len(thumbnails))]))
    return float(min(MAX_DIFFERENCE, max(MIN_DIFFERENCE, NOISE_FACTOR * noise)))


def _blocks(frames: np.ndarray, one: np.ndarray) -> np.ndarray:
    """Per frame of `frames` (N x H x W x C) and block: its mean absolute difference to `one`, in its most
    different channel (N x blocks)."""
    count, height, width = frames.shape[:3]
    difference = np.abs(frames.astype(np.int16) - one.astype(np.int16))
    blocks = difference.reshape(count, height // CELL, CELL, width // CELL, CELL, -1).mean(axis=(2, 4), dtype=np.float32)
    per_block: np.ndarray = blocks.max(axis=-1).reshape(count, -1)
    return per_block


def block_distance(frames: np.ndarray, one: np.ndarray) -> np.ndarray:
    """Per frame of `frames` (N x H x W x C, H and W multiples of `CELL`), its distance to `one` (H x W x C): the
    largest mean absolute difference over the CELL x CELL blocks, in any channel."""
    nearest: np.ndarray = _blocks(frames, one).max(axis=1)
    return nearest


def pick_frames(thumbnails: np.ndarray, durations: np.ndarray, count: int,
                min_difference: float) -> tuple[list[int], int]:
    """(indexes into `thumbnails` to keep, in ascending order; how many distinct frames there are), by the
    module docstring's three steps. `durations`: each frame's display time (0 where unknown).

    Example::

        >>> still, flash = np.zeros((1, 4, 4, 1)), np.full((1, 4, 4, 1), 200.0)
        >>> pick_frames(np.concatenate([still, still, flash, still]), np.zeros(4), 8, 1.0)
        ([0, 2], 2)
    """
    if len(thumbnails) == 0 or count < 1:
        return [], 0
    kept = [0]
    nearest = block_distance(thumbnails, thumbnails[0])  # each frame's distance to its nearest kept frame

    def keep(index: int) -> None:
        nonlocal nearest
        kept.append(index)
        nearest = np.minimum(nearest, block_distance(thumbnails, thumbnails[index]))

    total = float(durations.sum())
    if total > 0 and count > 1:
        for index in np.argsort(-durations, kind="stable"):
            if durations[index] * (count - 1) < total or len(kept) >= count:
                break
            if nearest[index] > min_difference:
                keep(int(index))
    while len(kept) < count:
        candidate = int(np.argmax(nearest))
        if nearest[candidate] <= min_difference:
            break
        keep(candidate)
    distinct = len(kept) + _distinct_left(thumbnails, nearest, min_difference, COUNT_FACTOR * count)
    return sorted(kept), distinct


def _distinct_left(thumbnails: np.ndarray, nearest: np.ndarray, min_difference: float, most: int) -> int:
    """How many distinct frames are among those farther than `min_difference` from every kept frame (greedy:
    each counted frame absorbs those near it), counting at most `most`."""
    left = 0
    nearest = nearest.copy()
    while left < most:
        candidate = int(np.argmax(nearest))
        if nearest[candidate] <= min_difference:
            break
        left += 1
        nearest = np.minimum(nearest, block_distance(thumbnails, thumbnails[candidate]))
    return left


def sample_frames(data: bytes, limits: FrameLimits, stop: threading.Event | None = None, frames: int = 1) -> Sample:
    """The kept frames of the animation `data` (module docstring; `frames`: its frame count from the header,
    for the thumbnail budget), each a still image of at most `limits.max_bytes`. ImageRejectedError for frames
    that cannot be decoded; LimitExceededError for a frame or the frames over a limit; DeadlineExceededError
    once `stop` is set (checked between frames). Two passes (thumbnails, then the kept frames): memory holds
    thumbnails and kept frames, never the whole animation. Blocking: run it off the event loop."""
    with _open(data) as image:
        side = thumbnail_side(*image.size, frames=frames)
    thumbnails: list[np.ndarray] = []
    durations: list[float] = []
    for _, rgb, duration in _frames(data, None, limits, stop):
        thumbnails.append(np.asarray(rgb.resize((side, side), Image.Resampling.BOX), dtype=np.uint8))
        durations.append(duration)
    if not thumbnails:
        return Sample([], 0)
    stacked = np.stack(thumbnails)
    kept, distinct = pick_frames(stacked, np.array(durations, dtype=np.float64), limits.sampled,
                                 noise_threshold(stacked))
    return Sample([_still(index, rgb, limits.max_bytes) for index, rgb, _ in _frames(data, set(kept), limits, stop)],
                  distinct)


def _open(data: bytes) -> Image.Image:
    try:
        return Image.open(io.BytesIO(data))
    except Exception as exc:
        raise ImageRejectedError(f"animation could not be decoded ({type(exc).__name__})") from None


def _frames(data: bytes, only: set[int] | None, limits: FrameLimits,
            stop: threading.Event | None) -> Iterator[tuple[int, Image.Image, float]]:
    """(number, RGB image, display ms) of each frame of `data` (those in `only`, when given), upright, alpha
    flattened onto white. Each frame's size is checked before its pixels are decoded."""
    total = 0
    last = max(only, default=-1) if only is not None else None
    with _open(data) as image:
        iterator = ImageSequence.Iterator(image)
        index = -1
        while True:
            try:
                frame = next(iterator)
            except StopIteration:
                return
            except Exception as exc:
                raise ImageRejectedError(f"animation frames are corrupt or truncated ({type(exc).__name__})") from None
            index += 1
            if last is not None and index > last:
                return
            if stop is not None and stop.is_set():
                raise DeadlineExceededError("the item's deadline passed while its animation was decoded")
            width, height = frame.size
            if width > limits.max_side or height > limits.max_side or width * height > limits.max_pixels:
                raise LimitExceededError(f"frame {index} is {width}x{height} as decoded; each frame must be at most "
                                         f"{limits.max_side} pixels a side and {limits.max_pixels} pixels "
                                         f"(limits.max_image_side, limits.max_image_pixels)")
            total += width * height
            if total > limits.max_total_pixels:
                raise LimitExceededError(f"its frames up to frame {index} hold {total} pixels as decoded; the limit is "
                                         f"{limits.max_total_pixels} (limits.max_animation_pixels)")
            if only is not None and index not in only:
                continue
            try:
                rgb = flatten_alpha(ImageOps.exif_transpose(frame))
            except Exception as exc:
                raise ImageRejectedError(f"animation frames are corrupt or truncated ({type(exc).__name__})") from None
            yield index, rgb, float(frame.info.get("duration") or 0)


def _still(index: int, frame: Image.Image, max_bytes: int) -> Frame:
    """Frame `index` as PNG, or as JPEG when the PNG is over `max_bytes`."""
    out = io.BytesIO()
    frame.save(out, "PNG", compress_level=PNG_LEVEL)
    if out.tell() <= max_bytes:
        return Frame(index, out.getvalue(), "PNG", *frame.size)
    out = io.BytesIO()
    frame.save(out, "JPEG", quality=JPEG_QUALITY)
    if out.tell() > max_bytes:
        raise LimitExceededError(f"frame {index} is {out.tell()} bytes as a still image; the limit is {max_bytes} "
                                 f"bytes (limits.max_image_bytes)")
    return Frame(index, out.getvalue(), "JPEG", *frame.size)


class FrameDecoder:
    """Decodes animations on threads of its own, bounded per tenant and in all (module docstring)."""

    def __init__(self, threads: int = DECODE_THREADS, *, per_tenant: int = PER_TENANT,
                 max_waiting: int = MAX_WAITING) -> None:
        self._executor = ThreadPoolExecutor(threads, thread_name_prefix="frames")
        self.per_tenant, self.max_waiting = per_tenant, max_waiting
        self._tenants: dict[str, int] = {}
        self._waiting = 0

    async def expand(self, item: ValidItem, limits: RequestLimits, *, tenant: str, deadline: float,
                     where: str = "item") -> tuple[ValidItem, dict[int, tuple[int, int]]]:
        """`item` with each animated image part replaced by its kept frames (and a `frames` stage failure for
        a part with distinct frames left over), and the map from the index each frame got to (the part's
        index, the frame's number). An item without animations comes back as it is, with an empty map.
        InvalidRequestError or LimitExceededError naming the part; LimitExceededError when the tenant or the
        router has too many animations decoding; DeadlineExceededError past `deadline` (time.monotonic)."""
        animated = [p for p in item.images if p.header.animated]
        if not animated:
            return item, {}
        share = max(1, min(limits.frames_sampled, limits.max_frames_per_item // len(animated)))
        frame_limits = replace(FrameLimits.of(limits), sampled=share)
        sampled: dict[int, Sample] = {}
        for part in animated:  # one at a time: a job is one animation, so others' jobs interleave with these
            sampled[part.index] = await self._decode(part, frame_limits, tenant, deadline,
                                                     f"{where}.parts[{part.index}].image")
        return _expanded(item, sampled)

    async def _decode(self, part: ImagePart, limits: FrameLimits, tenant: str, deadline: float, field: str) -> Sample:
        if self._tenants.get(tenant, 0) >= self.per_tenant:
            raise LimitExceededError(f"{field}: {self.per_tenant} animations of this tenant are being decoded; "
                                     f"retry when they are done")
        if self._waiting >= self.max_waiting:
            raise LimitExceededError(f"{field}: the router is decoding {self.max_waiting} animations; retry later")
        stop = threading.Event()
        self._tenants[tenant] = self._tenants.get(tenant, 0) + 1
        self._waiting += 1
        try:
            job = asyncio.get_running_loop().run_in_executor(self._executor, sample_frames, part.data, limits, stop,
                                                             part.header.frames)
            return await asyncio.wait_for(job, timeout=max(0.0, deadline - time.monotonic()))
        except (TimeoutError, asyncio.TimeoutError):
            raise DeadlineExceededError(f"{field}: the deadline passed while the animation was decoded") from None
        except ImageRejectedError as error:
            raise InvalidRequestError(f"{field}: {error}") from None
        except LimitExceededError as error:
            raise LimitExceededError(f"{field}: {error}") from None
        finally:
            stop.set()  # a decode still running (the caller left, or its deadline passed) stops at its next frame
            self._waiting -= 1
            self._tenants[tenant] -= 1
            if not self._tenants[tenant]:
                del self._tenants[tenant]

    def close(self) -> None:
        """Stop taking work; running decodes stop at their next frame once their callers are gone."""
        self._executor.shutdown(wait=False, cancel_futures=True)


def _expanded(item: ValidItem, sampled: Mapping[int, Sample]) -> tuple[ValidItem, dict[int, tuple[int, int]]]:
    parts: list[Part] = []
    frames: dict[int, tuple[int, int]] = {}
    failures: list[StageFailure] = list(item.failures)
    extra = len(item.parts)
    for part in item.parts:
        sample = sampled.get(part.index) if isinstance(part, ImagePart) else None
        if not isinstance(part, ImagePart) or sample is None:
            parts.append(part)
            continue
        for frame in sample.frames:
            index = part.index if frame.index == 0 else extra
            if frame.index:
                extra += 1
            frames[index] = (part.index, frame.index)
            header = replace(part.header, format=frame.format, width=frame.width, height=frame.height, frames=1,
                             animated=False)
            parts.append(ImagePart(index, frame.data, header, (part.index, frame.index)))
        if sample.distinct > len(sample.frames):
            failures.append(StageFailure(FRAMES_STAGE, f"parts[{part.index}]: {len(sample.frames)} of its "
                                         f"{sample.distinct} distinct frames judged (limits.frames_sampled, "
                                         f"limits.max_frames_per_item)"))
    return ValidItem(item.id, tuple(parts), tuple(failures)), frames


def with_frames(verdict: Verdict, frames: Mapping[int, tuple[int, int]]) -> Verdict:
    """`verdict` with the evidence of each frame given back its part's index and its frame number."""
    if not frames:
        return verdict
    return replace(verdict, evidence=[_located(e, frames) for e in verdict.evidence])


def _located(evidence: Evidence, frames: Mapping[int, tuple[int, int]]) -> Evidence:
    where = frames.get(evidence.part_index)
    if where is None:
        return evidence
    part, frame = where
    if isinstance(evidence, OcrLineEvidence):
        return replace(evidence, part_index=part, frame=frame, line=replace(evidence.line, part_index=part))
    return replace(evidence, part_index=part, frame=frame)
