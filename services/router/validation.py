"""Checking a moderation request before any work is queued. Pure: works on plain values.

Errors name the offending field (`items[2].parts[0].image`) and, for size limits, the limit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from services.common.errors import InvalidRequestError, LimitExceededError
from services.common.image_decode import ImageHeader, inspect_image
from services.common.errors import ImageRejectedError
from services.router.config import RequestLimits


@dataclass(frozen=True)
class TextPart:
    index: int
    text: str


@dataclass(frozen=True)
class ImagePart:
    index: int
    data: bytes
    header: ImageHeader
    #: A frame of an animation (services/router/frames.py): (the part's index as sent, the frame's number).
    origin: tuple[int, int] | None = None

    @property
    def field(self) -> str:
        """How an error names this part: `parts[i]`, or `parts[i] frame n` for a frame of an animation."""
        return f"parts[{self.origin[0]}] frame {self.origin[1]}" if self.origin else f"parts[{self.index}]"


Part = TextPart | ImagePart


@dataclass(frozen=True)
class ValidItem:
    id: str
    parts: tuple[Part, ...]
    #: The animated image parts as sent, once `parts` holds a sample of their frames instead
    #: (services/router/frames.py): their files are matched by exact hash besides.
    animations: tuple[ImagePart, ...] = ()

    @property
    def texts(self) -> list[TextPart]:
        return [p for p in self.parts if isinstance(p, TextPart)]

    @property
    def images(self) -> list[ImagePart]:
        return [p for p in self.parts if isinstance(p, ImagePart)]


@dataclass(frozen=True)
class RawPart:
    """A part as received: exactly one of `text` / `image` is set (None for the other)."""

    text: str | None
    image: bytes | None


def validate_metadata(metadata: Mapping[str, str], limits: RequestLimits, where: str = "item") -> None:
    """LimitExceededError naming the limit (its key under `limits`) when `metadata` is over it.

    Example::

        validate_metadata({"channel": "x" * 5000}, RequestLimits())
        # LimitExceededError: item.metadata['channel'] is 5000 characters; the limit is 1024 (limits.max_metadata_value_chars)
    """
    if len(metadata) > limits.max_metadata_entries:
        raise LimitExceededError(f"{where}.metadata has {len(metadata)} entries; the limit is "
                                 f"{limits.max_metadata_entries} (limits.max_metadata_entries)")
    for key, value in metadata.items():
        if len(key) > limits.max_metadata_key_chars:
            raise LimitExceededError(f"{where}.metadata has a key of {len(key)} characters (starting {key[:16]!r}); "
                                     f"the limit is {limits.max_metadata_key_chars} (limits.max_metadata_key_chars)")
        if len(value) > limits.max_metadata_value_chars:
            raise LimitExceededError(f"{where}.metadata[{key!r}] is {len(value)} characters; the limit is "
                                     f"{limits.max_metadata_value_chars} (limits.max_metadata_value_chars)")


def check_animation(header: ImageHeader, limits: RequestLimits, field: str) -> None:
    """LimitExceededError naming the limit when the animation `header` describes is over the frame count or
    the pixels decoded over all frames (frames x width x height): a frame bomb, refused from the header."""
    if not header.animated:
        return
    if header.frames > limits.max_animation_frames:
        raise LimitExceededError(f"{field} is an animation of {header.frames} frames; the limit is "
                                 f"{limits.max_animation_frames} (limits.max_animation_frames)")
    pixels = header.frames * header.width * header.height
    if pixels > limits.max_animation_pixels:
        raise LimitExceededError(f"{field} is an animation of {header.frames} frames of {header.width}x{header.height}: "
                                 f"{pixels} pixels to decode; the limit is {limits.max_animation_pixels} "
                                 f"(limits.max_animation_pixels)")


def validate_item(item_id: str, parts: Sequence[RawPart], limits: RequestLimits, where: str = "item",
                  metadata: Mapping[str, str] | None = None) -> ValidItem:
    """Validate one item (and its metadata); raises InvalidRequestError or LimitExceededError naming `where`."""
    validate_metadata(metadata or {}, limits, where)
    if len(item_id) > limits.max_item_id_chars:
        raise LimitExceededError(f"{where}.id is {len(item_id)} characters; the limit is {limits.max_item_id_chars}")
    if not parts:
        raise InvalidRequestError(f"{where}.parts is empty: send at least one text or image part")
    if len(parts) > limits.max_parts_per_item:
        raise LimitExceededError(f"{where}.parts has {len(parts)} parts; the limit is {limits.max_parts_per_item}")
    checked: list[Part] = []
    for index, part in enumerate(parts):
        field = f"{where}.parts[{index}]"
        if part.text is not None:
            if not part.text.strip():
                raise InvalidRequestError(f"{field}.text is empty or only whitespace")
            if len(part.text) > limits.max_text_chars:
                raise LimitExceededError(f"{field}.text has {len(part.text)} characters; the limit is {limits.max_text_chars}")
            checked.append(TextPart(index, part.text))
        elif part.image is not None:
            if len(part.image) > limits.max_image_bytes:
                raise LimitExceededError(f"{field}.image is {len(part.image)} bytes; the limit is {limits.max_image_bytes} bytes")
            try:
                header = inspect_image(part.image, limits.image_limits(), animated=True,
                                       max_frames=limits.max_animation_frames)
            except ImageRejectedError as error:
                raise InvalidRequestError(f"{field}.image: {error}") from None
            check_animation(header, limits, f"{field}.image")
            checked.append(ImagePart(index, part.image, header))
        else:
            raise InvalidRequestError(f"{field} has no content: set either text or image")
    return ValidItem(item_id, tuple(checked))
