"""Animated images (GIF, animated WebP, APNG) judged on a bounded sample of their frames (issue 42).

A viewer sees every frame of an animation; the modality services judge still images. The router checks an
animation's frame count from its header when it validates the request (`check_animation` in
services/router/validation.py: a frame bomb is refused before anything is queued), and after admission,
off the event loop, decodes its frames and keeps a sample (`sample_frames`):

- the first frame (what a feed shows before it plays), then
- the frames that differ most from every frame already kept (farthest-point sampling on 128 x 128 grey
  thumbnails, two frames as far apart as their most different 4 x 4 block: a caption that shows in one
  frame counts), until `limits.frames_sampled` frames are kept or no frame is left that differs from a
  kept one by more than `MIN_DIFFERENCE`.

A frame unlike the rest is kept before any near-copy of a kept frame, however briefly it shows: a harmful
frame hidden among many similar ones is judged. An animation with more distinct scenes than the sample
holds leaves some unjudged (docs/security.md, "Animated images").

Each kept frame goes on as its own still image (PNG; JPEG when the PNG would pass `limits.max_image_bytes`).
`expand_animations` gives the item with each animated part replaced by its frames (the first frame keeps
the part's index; later frames get indexes past the item's parts) and the map back; `with_frames` puts the
part index and frame number back into the decision's evidence, so the response says which frame decided.

Example::

    item, frames = await expand_animations(valid, limits)
    ...                                             # the pipeline judges `item` as it judges any item
    verdict = with_frames(outcome.verdict, frames)  # evidence: part_index 0, frame 17
"""

from __future__ import annotations

import asyncio
import io
from concurrent.futures import ThreadPoolExecutor
import warnings
from dataclasses import dataclass, replace
from typing import Iterator, Mapping, Sequence

import numpy as np
from PIL import Image, ImageSequence

from services.common.errors import ImageRejectedError, InvalidRequestError, LimitExceededError
from services.common.image_decode import flatten_alpha
from services.router.config import RequestLimits
from services.router.fusion import Evidence, OcrLineEvidence, Verdict
from services.router.validation import ImagePart, Part, ValidItem

__all__ = ["CELL", "MIN_DIFFERENCE", "THUMBNAIL_SIDE", "Frame", "block_distance", "expand_animations", "pick_distinct",
           "sample_frames", "with_frames"]

#: Side of the grey thumbnails frames are compared on (area-averaged).
THUMBNAIL_SIDE = 128
#: Two frames differ by their most different CELL x CELL block of thumbnail pixels (mean absolute grey
#: difference, 0-255): a caption or a small picture that shows in one frame counts as much as a change of
#: scene, where a mean over the whole frame would drown it.
CELL = 4
#: A frame less than this far from every kept frame is a copy (measured: re-encoding noise of GIF and lossy
#: WebP frames stays under about 2.2; a short caption in default-size type on a 500-pixel frame is 6.6 to 23).
MIN_DIFFERENCE = 4.0
#: Animations decoded at once, per router process: their own threads, so a flood of them waits its turn
#: instead of taking the threads other work of the router (the audit log, the admin API) runs on.
DECODE_THREADS = 2
_DECODER = ThreadPoolExecutor(DECODE_THREADS, thread_name_prefix="frames")
#: PNG compression for the frames sent on (1: fast; they are read once).
PNG_LEVEL = 1
#: JPEG quality when a frame's PNG is over the image byte limit.
JPEG_QUALITY = 92


@dataclass(frozen=True)
class Frame:
    """One kept frame: its number in the animation (0 = first) and its still image bytes."""

    index: int
    data: bytes
    #: "PNG", or "JPEG" for a frame whose PNG was over the byte limit.
    format: str = "PNG"


def block_distance(frames: np.ndarray, one: np.ndarray) -> np.ndarray:
    """Per frame of `frames` (N x H x W grey, H and W multiples of `CELL`), its distance to `one` (H x W): the
    largest mean absolute difference over the CELL x CELL blocks."""
    count, height, width = frames.shape
    difference = np.abs(frames.astype(np.int16) - one.astype(np.int16))
    blocks = difference.reshape(count, height // CELL, CELL, width // CELL, CELL).mean(axis=(2, 4), dtype=np.float32)
    nearest: np.ndarray = blocks.reshape(count, -1).max(axis=1)
    return nearest


def pick_distinct(thumbnails: np.ndarray, count: int, min_difference: float = MIN_DIFFERENCE) -> list[int]:
    """Indexes into `thumbnails` (frames x H x W, grey, H and W multiples of `CELL`) to keep, in ascending
    order: the first, then repeatedly the one farthest (`block_distance`) from every kept one, while it is
    more than `min_difference` away, up to `count`. Ties go to the earliest frame.

    Example::

        >>> still, flash = np.zeros((1, 4, 4)), np.full((1, 4, 4), 200.0)
        >>> pick_distinct(np.concatenate([still, still, flash, still]), 8)
        [0, 2]
    """
    if len(thumbnails) == 0 or count < 1:
        return []
    kept = [0]
    nearest = block_distance(thumbnails, thumbnails[0])  # each frame's distance to its nearest kept frame
    while len(kept) < count:
        candidate = int(np.argmax(nearest))
        if nearest[candidate] <= min_difference:
            break
        kept.append(candidate)
        nearest = np.minimum(nearest, block_distance(thumbnails, thumbnails[candidate]))
    return sorted(kept)


def sample_frames(data: bytes, count: int, max_bytes: int) -> list[Frame]:
    """The kept frames of the animation `data` (module docstring), each a still image of at most `max_bytes`.
    ImageRejectedError for frames that cannot be decoded, LimitExceededError for a frame over `max_bytes`
    even as JPEG. Two passes (thumbnails, then the kept frames), so memory holds thumbnails and kept frames,
    never the whole animation. Blocking (measured: 0.25 s of CPU for 160 frames of 500 x 500, 1 s for
    1,000 frames of 200 x 200, the most the default limits allow): run it off the event loop."""
    thumbnails = [np.asarray(rgb.convert("L").resize((THUMBNAIL_SIDE, THUMBNAIL_SIDE), Image.Resampling.BOX),
                             dtype=np.uint8) for _, rgb in _frames(data, None)]
    kept = pick_distinct(np.stack(thumbnails), count) if thumbnails else []
    return [_still(index, rgb, max_bytes) for index, rgb in _frames(data, set(kept))]


def _frames(data: bytes, only: set[int] | None) -> Iterator[tuple[int, Image.Image]]:
    """(number, RGB image) of each frame of `data` (those in `only`, when given), alpha flattened onto white."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as image:
                for index, frame in enumerate(ImageSequence.Iterator(image)):
                    if only is not None and index > max(only, default=-1):
                        return
                    if only is None or index in only:
                        yield index, flatten_alpha(frame)
    except Exception as exc:
        raise ImageRejectedError(f"animation frames are corrupt or truncated ({type(exc).__name__}: {exc})") from None


def _still(index: int, frame: Image.Image, max_bytes: int) -> Frame:
    """Frame `index` as PNG, or as JPEG when the PNG is over `max_bytes`."""
    out = io.BytesIO()
    frame.save(out, "PNG", compress_level=PNG_LEVEL)
    if out.tell() <= max_bytes:
        return Frame(index, out.getvalue())
    out = io.BytesIO()
    frame.save(out, "JPEG", quality=JPEG_QUALITY)
    if out.tell() > max_bytes:
        raise LimitExceededError(f"an animation frame is {out.tell()} bytes as a still image; the limit is {max_bytes} "
                                 f"bytes (limits.max_image_bytes)")
    return Frame(index, out.getvalue(), "JPEG")


async def expand_animations(item: ValidItem, limits: RequestLimits,
                            where: str = "item") -> tuple[ValidItem, dict[int, tuple[int, int]]]:
    """`item` with each animated image part replaced by its kept frames, and the map from the index each frame
    got to (the part's index, the frame's number). An item without animations comes back as it is, with an
    empty map. InvalidRequestError naming the part for frames that cannot be decoded."""
    animated = [p for p in item.images if p.header.animated]
    if not animated:
        return item, {}
    sampled = await asyncio.get_running_loop().run_in_executor(_DECODER, _sample_parts, animated, limits, where)
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
            parts.append(ImagePart(index, frame.data, replace(part.header, format=frame.format, frames=1, animated=False)))
    return ValidItem(item.id, tuple(parts)), frames


def _sample_parts(parts: Sequence[ImagePart], limits: RequestLimits, where: str) -> dict[int, list[Frame]]:
    out: dict[int, list[Frame]] = {}
    for part in parts:
        try:
            out[part.index] = sample_frames(part.data, limits.frames_sampled, limits.max_image_bytes)
        except ImageRejectedError as error:
            raise InvalidRequestError(f"{where}.parts[{part.index}].image: {error}") from None
        except LimitExceededError as error:
            raise LimitExceededError(f"{where}.parts[{part.index}].image: {error}") from None
    return out


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
