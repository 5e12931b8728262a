"""Images the router itself decodes and hashes for known-content banks (BankAdmin's AddContent and
RemoveContent, reviewers' image labels): bounded per call, checked from their headers before any is decoded.

Example::

    check_images([("contents[0].image", data)])   # InvalidRequestError or LimitExceededError naming the field
"""

from __future__ import annotations

from typing import Sequence

from services.common.errors import ImageRejectedError, InvalidRequestError, LimitExceededError
from services.common.image_decode import ImageLimits, inspect_image

__all__ = ["MAX_CALL_PIXELS", "MAX_IMAGES", "MAX_IMAGE_PIXELS", "check_images"]

#: Images of one call at most, and their pixels: each is decoded and hashed on the router (a 40-megapixel
#: PNG takes seconds to decode).
MAX_IMAGES = 64
MAX_IMAGE_PIXELS = 16_000_000
MAX_CALL_PIXELS = 64_000_000


def check_images(images: Sequence[tuple[str, bytes]], what: str = "contents") -> None:
    """Refuse a call's images (each named by its field) over the bounds, or one whose header a decoder would
    refuse, before any is decoded."""
    if len(images) > MAX_IMAGES:
        raise LimitExceededError(f"{what}: at most {MAX_IMAGES} images per call (each is hashed on the router)")
    pixels = 0
    for field, data in images:
        try:
            header = inspect_image(data, ImageLimits(max_pixels=MAX_IMAGE_PIXELS))
        except ImageRejectedError as error:
            raise InvalidRequestError(f"{field}: {error}") from None
        pixels += header.width * header.height
        if pixels > MAX_CALL_PIXELS:
            raise LimitExceededError(f"{what}: images of more than {MAX_CALL_PIXELS} pixels in one call (each is hashed "
                                     "on the router): send fewer")
