"""Animated images (GIF, animated WebP, APNG) judged on a bounded sample of their frames (issue 42).

A viewer sees every frame of an animation; the modality services judge still images. The router checks an
animation's frame count from its blocks when it validates the request (`check_animation` in
services/router/validation.py; services/common/animation_header.py: a frame bomb is refused before anything
is queued), and after admission, off the event loop, decodes its frames and keeps a sample (`sample_frames`,
`pick_frames`) of at most `limits.frames_sampled` frames:

1. the first frame (what a feed shows before it plays);
2. the frames on screen at evenly spaced moments of the loop (half the sample): a scene that holds the screen
   for a share of the loop is judged however it is cut into frames, and whatever brief frames surround it
   (a delay of 10 ms or less counts as 100 ms, as browsers show it);
3. the frames most unlike every frame already kept (farthest-point sampling), until the sample is full or
   no frame is left that differs from a kept one by more than `MIN_DIFFERENCE`: a frame shown for one tick
   that differs from the rest is judged.

Two frames are as far apart as their most different block of `CELL` x `CELL` pixels of colour thumbnails
(mean absolute difference, in any of R, G, B; thumbnails sized from the canvas the frames are drawn on,
so that a block covers at most about `SOURCE_BLOCK` pixels of a frame): a caption that shows in one frame
counts as much as a change of scene, and a difference of colour counts where brightness is equal.

**Limit.** An animation with more distinct scenes than the sample holds, each shown briefly, has some frames
unjudged; the evidence names the frames that were judged and decided.

Bounds, beside the header's (`check_animation`): at most `limits.max_animation_frames` frames as decoded,
each frame as decoded (a GIF frame may be larger than the screen its header declares) within
`limits.max_image_side` and `max_image_pixels`, and the frames read so far within
`limits.max_animation_pixels`, each checked before its pixels are decoded (RESOURCE_EXHAUSTED naming the
limit). Decoding runs on `DECODE_THREADS` threads of its own (`FrameDecoder`): a tenant has at most
`PER_TENANT` animations decoding at once (more wait their turn) and `PER_TENANT_WAITING` decoding or
waiting, the router at most `MAX_WAITING` (past either, RESOURCE_EXHAUSTED with a retry delay); a decode past
the item's deadline stops at its next frame or comparison, and its turn is given back only when its thread
has stopped. Frames as decoded that outnumber those counted in the blocks (a file built so that decoders
disagree) are refused: the count from the blocks is what sizes the thumbnails.

Each kept frame goes on as its own still image (PNG; JPEG when the PNG would pass `limits.max_image_bytes`).
`FrameDecoder.expand` gives the item with each animated part replaced by its frames (the first frame keeps
the part's index; later frames get indexes past the item's parts) and the map back; `with_frames` puts the
part index and frame number back into the decision's evidence, so the response says which frame decided.
Frame numbers are Pillow's: an APNG's default image, when it is not part of the animation, is frame 0.

Example::

    item, frames = await decoder.expand(valid, limits, tenant="acme", deadline=deadline)
    ...                                             # the pipeline judges `item` as it judges any item
    verdict = with_frames(outcome.verdict, frames)  # evidence: part_index 0, frame 17
"""

from __future__ import annotations

import asyncio
import functools
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
from services.router.fusion import Evidence, OcrLineEvidence, Verdict
from services.router.validation import ImagePart, Part, ValidItem

__all__ = ["CELL", "DECODE_THREADS", "MIN_DIFFERENCE", "MAX_WAITING", "PER_TENANT", "Frame", "FrameDecoder",
           "FrameLimits", "block_distance", "display_times", "pick_frames", "sample_frames", "thumbnail_side", "with_frames"]

#: Two frames differ by their most different CELL x CELL block of thumbnail pixels, a block covering at most
#: about SOURCE_BLOCK x SOURCE_BLOCK pixels of the frame (thumbnails of at least 128 pixels a side).
CELL = 2
SOURCE_BLOCK = 32
#: Thumbnail values (frames x side x side x 3) one animation may hold: past it the side shrinks.
THUMBNAIL_BUDGET = 8_000_000
#: A frame further than this (block mean absolute difference, 0-255) from every kept frame is new. Low on
#: purpose: what it decides is only whether the sample's room is used, never whether a frame is judged at all.
#: Measured: a light-grey caption on a clean 2,000-pixel frame is 3.2 away; re-encoding noise 1.5-9.
MIN_DIFFERENCE = 1.0
#: Delays of at most this many ms are shown as BROWSER_DELAY_MS by browsers.
SHORTEST_DELAY_MS = 10.0
BROWSER_DELAY_MS = 100.0
#: Animations decoded at once per router process, on threads of their own (so a flood of them waits its turn
#: instead of taking the threads the rest of the router runs blocking work on).
DECODE_THREADS = 2
#: Animations one tenant may have decoding at once; more wait their turn.
PER_TENANT = 2
#: Animations one tenant may have decoding or waiting (so that one tenant cannot take the router's whole
#: bound); beyond, RESOURCE_EXHAUSTED (retry after RETRY_AFTER_S).
PER_TENANT_WAITING = 16
#: Animations decoding or waiting in all; beyond, RESOURCE_EXHAUSTED (retry after RETRY_AFTER_S).
MAX_WAITING = 64
RETRY_AFTER_S = 1.0
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
    max_frames: int = 1000

    @classmethod
    def of(cls, limits: RequestLimits) -> FrameLimits:
        return cls(limits.frames_sampled, limits.max_image_bytes, limits.max_image_side, limits.max_image_pixels,
                   limits.max_animation_pixels, limits.max_animation_frames)


@dataclass(frozen=True)
class Frame:
    """One kept frame: its number in the animation (0 = first) and its still image bytes."""

    index: int
    data: bytes
    #: "PNG", or "JPEG" for a frame whose PNG was over the byte limit.
    format: str = "PNG"
    width: int = 0
    height: int = 0


def thumbnail_side(width: int, height: int, frames: int = 1) -> int:
    """The side of the thumbnails frames drawn on a `width` x `height` canvas are compared on: enough that a
    CELL x CELL block covers at most about SOURCE_BLOCK source pixels, at least 128 (or the canvas's own
    size), at most 512, and within THUMBNAIL_BUDGET over `frames` frames; a multiple of CELL.

    Example::

        >>> thumbnail_side(500, 300), thumbnail_side(4000, 3000), thumbnail_side(200, 200, frames=1000)
        (128, 250, 50)
    """
    longest = max(width, height)
    side = max(min(128, longest), math.ceil(longest * CELL / SOURCE_BLOCK))
    side = min(side, 512, int(math.sqrt(THUMBNAIL_BUDGET / (3 * max(frames, 1)))))
    return max(CELL, side - side % CELL)


def block_distance(frames: np.ndarray, one: np.ndarray) -> np.ndarray:
    """Per frame of `frames` (N x H x W x C, H and W multiples of `CELL`), its distance to `one` (H x W x C): the
    largest mean absolute difference over the CELL x CELL blocks, in any channel."""
    count, height, width = frames.shape[:3]
    difference = np.abs(frames.astype(np.int16, copy=False) - one.astype(np.int16, copy=False))
    blocks = difference.reshape(count, height // CELL, CELL, width // CELL, CELL, -1).mean(axis=(2, 4), dtype=np.float32)
    nearest: np.ndarray = blocks.reshape(count, -1).max(axis=1)
    return nearest


def display_times(delays_ms: np.ndarray) -> np.ndarray:
    """Each frame's time on screen as browsers show it: a delay of at most SHORTEST_DELAY_MS (or none) is
    BROWSER_DELAY_MS."""
    return np.where(delays_ms <= SHORTEST_DELAY_MS, BROWSER_DELAY_MS, delays_ms).astype(np.float64)


def pick_frames(thumbnails: np.ndarray, delays_ms: np.ndarray, count: int,
                stop: threading.Event | None = None) -> list[int]:
    """Indexes into `thumbnails` (N x H x W x C) to keep, in ascending order, by the module docstring's three
    steps. `delays_ms`: each frame's delay as the file gives it. DeadlineExceededError once `stop` is set.

    Example::

        >>> still, flash = np.zeros((1, 4, 4, 1)), np.full((1, 4, 4, 1), 200.0)
        >>> pick_frames(np.concatenate([still, still, flash, still]), np.zeros(4), 8)
        [0, 2]
    """
    if len(thumbnails) == 0 or count < 1:
        return []
    frames = thumbnails.astype(np.int16)  # once: every comparison reads them
    kept = [0]
    nearest = block_distance(frames, frames[0])  # each frame's distance to its nearest kept frame

    def keep(index: int) -> None:
        nonlocal nearest
        _check(stop)
        kept.append(index)
        nearest = np.minimum(nearest, block_distance(frames, frames[index]))

    if count > 1 and len(frames) > 1:
        moments = max(1, (count - 1) // 2)
        ends = np.cumsum(display_times(delays_ms))
        for k in range(1, moments + 1):  # the frames on screen at evenly spaced moments of the loop
            index = int(np.searchsorted(ends, ends[-1] * k / (moments + 1), side="right"))
            index = min(index, len(frames) - 1)
            if index not in kept and nearest[index] > MIN_DIFFERENCE:
                keep(index)
    while len(kept) < count:
        candidate = int(np.argmax(nearest))
        if nearest[candidate] <= MIN_DIFFERENCE:
            break
        keep(candidate)
    return sorted(kept)


def _check(stop: threading.Event | None) -> None:
    if stop is not None and stop.is_set():
        raise DeadlineExceededError("the item's deadline passed while its animation was decoded")


def sample_frames(data: bytes, limits: FrameLimits, stop: threading.Event | None = None, *,
                  canvas: tuple[int, int] = (0, 0), frames: int = 0) -> list[Frame]:
    """The kept frames of the animation `data` (module docstring; `canvas`: the size its frames are drawn on
    and `frames` its frame count, both from its blocks (0: Pillow's count), for the thumbnails; more frames
    as decoded are refused), each a still image of at most
    `limits.max_bytes`. ImageRejectedError for frames that cannot be decoded; LimitExceededError for a frame
    or the frames over a limit; DeadlineExceededError once `stop` is set (checked between frames and
    comparisons). Two passes (thumbnails, then the kept frames): memory holds thumbnails and kept frames,
    never the whole animation. Blocking: run it off the event loop."""
    with _open(data) as image:
        width, height = max(canvas[0], image.size[0]), max(canvas[1], image.size[1])
        if frames < 1:  # not counted from the blocks: Pillow's own count (it walks the frames; off the loop here)
            frames = min(int(getattr(image, "n_frames", 1)), limits.max_frames + 1)
    side = thumbnail_side(width, height, frames=frames)  # the count `_frames` holds the decode to
    thumbnails: list[np.ndarray] = []
    delays: list[float] = []
    for _, rgb, delay in _frames(data, None, limits, stop, frames):
        thumbnails.append(np.asarray(rgb.resize((side, side), Image.Resampling.BOX), dtype=np.uint8))
        delays.append(delay)
    if not thumbnails:
        return []
    kept = pick_frames(np.stack(thumbnails), np.array(delays, dtype=np.float64), limits.sampled, stop)
    return [_still(index, rgb, limits.max_bytes) for index, rgb, _ in _frames(data, set(kept), limits, stop)]


def _open(data: bytes) -> Image.Image:
    try:
        return Image.open(io.BytesIO(data))
    except Exception as exc:
        raise ImageRejectedError(f"animation could not be decoded ({type(exc).__name__})") from None


def _frames(data: bytes, only: set[int] | None, limits: FrameLimits, stop: threading.Event | None,
            counted: int = 0) -> Iterator[tuple[int, Image.Image, float]]:
    """(number, RGB image, display ms) of each frame of `data` (those in `only`, when given), upright, alpha
    flattened onto white. Each frame's size is checked before its pixels are decoded; more frames than
    `counted` (from the blocks; 0: not checked) is ImageRejectedError."""
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
            _check(stop)
            if index >= limits.max_frames:
                raise LimitExceededError(f"it has more than {limits.max_frames} frames as decoded "
                                         f"(limits.max_animation_frames)")
            if counted and index >= counted:
                raise ImageRejectedError(f"its frames as decoded outnumber the {counted} its blocks hold (a file built "
                                         f"so that decoders disagree)")
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
        self._turns: dict[str, asyncio.Semaphore] = {}
        self._waiting = 0
        self._waiting_of: dict[str, int] = {}

    async def expand(self, item: ValidItem, limits: RequestLimits, *, tenant: str, deadline: float,
                     where: str = "item") -> tuple[ValidItem, dict[int, tuple[int, int]]]:
        """`item` with each animated image part replaced by its kept frames, and the map from the index each frame
        got to (the part's index, the frame's number). An item without animations comes back as it is, with an
        empty map. The item's animations share `limits.max_frames_per_item` (an animation of one frame needs
        one). InvalidRequestError or LimitExceededError naming the part; LimitExceededError when the router has
        too many animations decoding; DeadlineExceededError past `deadline` (time.monotonic)."""
        animated = [p for p in item.images if p.header.animated]
        if not animated:
            return item, {}
        moving = [p for p in animated if p.header.frames > 1]
        room = limits.max_frames_per_item - (len(animated) - len(moving))
        share = max(1, min(limits.frames_sampled, room // len(moving))) if moving else 1
        frame_limits = replace(FrameLimits.of(limits), sampled=share)
        sampled: dict[int, list[Frame]] = {}
        for part in animated:  # one at a time: a job is one animation, so others' jobs interleave with these
            sampled[part.index] = await self._decode(part, frame_limits if part.header.frames > 1 else
                                                     replace(frame_limits, sampled=1), tenant, deadline,
                                                     f"{where}.parts[{part.index}].image")
        return _expanded(item, sampled)

    async def _decode(self, part: ImagePart, limits: FrameLimits, tenant: str, deadline: float,
                      field: str) -> list[Frame]:
        if self._waiting_of.get(tenant, 0) >= PER_TENANT_WAITING:
            raise _busy(f"{field}: {PER_TENANT_WAITING} animations of this tenant are decoding or waiting; retry later")
        if self._waiting >= self.max_waiting:
            raise _busy(f"{field}: the router is decoding {self.max_waiting} animations; retry later")
        self._waiting += 1
        self._waiting_of[tenant] = self._waiting_of.get(tenant, 0) + 1
        try:
            turn = self._turns.setdefault(tenant, asyncio.Semaphore(self.per_tenant))
            try:
                await asyncio.wait_for(turn.acquire(), timeout=max(0.0, deadline - time.monotonic()))
            except (TimeoutError, asyncio.TimeoutError):
                raise DeadlineExceededError(f"{field}: the deadline passed while the animation waited to be "
                                            f"decoded") from None
            stop = threading.Event()
            try:
                job = asyncio.get_running_loop().run_in_executor(
                    self._executor, functools.partial(sample_frames, part.data, limits, stop,
                                                      canvas=(part.header.width, part.header.height),
                                                      frames=part.header.frames))
            except BaseException:
                turn.release()  # no thread took it
                raise
            job.add_done_callback(functools.partial(_give_back, turn))  # the turn ends when the thread has stopped
            try:
                return await asyncio.wait_for(asyncio.shield(job), timeout=max(0.0, deadline - time.monotonic()))
            except (TimeoutError, asyncio.TimeoutError):
                raise DeadlineExceededError(f"{field}: the deadline passed while the animation was decoded") from None
            finally:
                stop.set()  # a decode still running (the caller left, or its deadline passed) stops at its next step
        except ImageRejectedError as error:
            raise InvalidRequestError(f"{field}: {error}") from None
        except LimitExceededError as error:  # a frame or the frames over a limit: named with the part
            raise LimitExceededError(f"{field}: {error}") from None
        finally:
            self._waiting -= 1
            self._waiting_of[tenant] -= 1
            if not self._waiting_of[tenant]:
                del self._waiting_of[tenant]

    def close(self) -> None:
        """Stop taking work; running decodes stop at their next step once their callers are gone."""
        self._executor.shutdown(wait=False, cancel_futures=True)


def _busy(message: str) -> LimitExceededError:
    """RESOURCE_EXHAUSTED with a retry delay (sent as google.rpc.RetryInfo: clients back off and retry)."""
    busy = LimitExceededError(message)
    busy.retry_after_s = RETRY_AFTER_S
    return busy


def _give_back(turn: asyncio.Semaphore, job: asyncio.Future[list[Frame]]) -> None:
    """A finished decode's turn back to its tenant; its outcome read (a caller that left never reads it)."""
    turn.release()
    if not job.cancelled():
        job.exception()


def _expanded(item: ValidItem, sampled: Mapping[int, list[Frame]]) -> tuple[ValidItem, dict[int, tuple[int, int]]]:
    parts: list[Part] = []
    frames: dict[int, tuple[int, int]] = {}
    extra = len(item.parts)
    for part in item.parts:
        kept = sampled.get(part.index) if isinstance(part, ImagePart) else None
        if not isinstance(part, ImagePart) or kept is None:
            parts.append(part)
            continue
        for frame in kept:
            index = part.index if frame.index == 0 else extra
            if frame.index:
                extra += 1
            frames[index] = (part.index, frame.index)
            header = replace(part.header, format=frame.format, width=frame.width, height=frame.height, frames=1,
                             animated=False)
            parts.append(ImagePart(index, frame.data, header, (part.index, frame.index)))
    animations = tuple(p for p in item.images if p.index in sampled)
    return ValidItem(item.id, tuple(parts), item.animations + animations), frames


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
