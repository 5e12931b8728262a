"""Decode a batch of client-sent image bytes, one outcome per item, so one bad image fails alone.

Decoding and every safety limit are `services.common.image_decode`'s; this module only turns its
`ImageRejectedError` into a per-item `RejectedImage` and keeps the header facts the response reports.

Example::

    outcomes = decode_batch([jpeg_bytes, b"not an image"])
    [type(o).__name__ for o in outcomes]   # ['DecodedImage', 'RejectedImage']
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from services.common.image_decode import ImageLimits, decode_image
from services.common.errors import ImageRejectedError


@dataclass(frozen=True)
class DecodedImage:
    """Pixels (RGB uint8, H x W x 3) and what the header said."""

    rgb: np.ndarray
    format: str
    width: int
    height: int


@dataclass(frozen=True)
class RejectedImage:
    """Why an item could not be used; `reason` is safe to return to the client verbatim."""

    reason: str

    def __post_init__(self) -> None:
        if not self.reason:
            raise ValueError("RejectedImage.reason must not be empty")


def decode_item(data: bytes, limits: ImageLimits = ImageLimits()) -> DecodedImage | RejectedImage:
    """Decode one image, or say why it was rejected (never raises ImageRejectedError).

    Example::

        decode_item(b"")   # RejectedImage(reason='image is empty (0 bytes)')
    """
    try:
        header, rgb = decode_image(data, limits)
    except ImageRejectedError as exc:
        return RejectedImage(str(exc))
    return DecodedImage(rgb, header.format, header.width, header.height)


def decode_batch(items: Sequence[bytes], limits: ImageLimits = ImageLimits()) -> list[DecodedImage | RejectedImage]:
    """`decode_item` for each item, in order.

    Example::

        decode_batch([png_bytes], ImageLimits(max_side=4096))
    """
    return [decode_item(item, limits) for item in items]
