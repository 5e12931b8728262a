"""Safe image decoding shared by the router (validation), the vision and the OCR services.

Defences: a byte-size limit checked before parsing; a format allow-list (JPEG, PNG, WebP) read from
the header; width, height and pixel-count limits checked from the header *before* any pixel is
decoded (so a small file that declares a huge canvas, a decompression bomb, is rejected cheaply);
Pillow's own bomb warning turned into an error; animated images (GIF, APNG, animated WebP) refused by
default, frame count read from the header (any PNG with an animation chunk): only one frame would be
moderated while a viewer sees them all, so a benign first frame would carry the rest through. The router
accepts them (`animated=True`) and sends a sample of their frames on as still images
(services/router/frames.py); the modality services judge stills only. Transparency composited onto white
(see `flatten_alpha`); EXIF orientation applied.
"""

from __future__ import annotations

import io
import warnings
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageOps
from services.common.animation_header import apng_declared_frames, apng_frame_controls, gif_frames
from services.common.errors import ImageRejectedError

ALLOWED_FORMATS = ("JPEG", "PNG", "WEBP")
#: Accepted only where animations are (`inspect_image(..., animated=True)`): the router's request parts.
ANIMATED_FORMATS = ("GIF",)


@dataclass(frozen=True)
class ImageLimits:
    """Limits applied before and during decoding."""

    max_bytes: int = 10 * 1024 * 1024
    max_side: int = 8192
    max_pixels: int = 40_000_000

    def __post_init__(self) -> None:
        for name in ("max_bytes", "max_side", "max_pixels"):
            if getattr(self, name) < 1:
                raise ValueError(f"ImageLimits.{name} must be >= 1, got {getattr(self, name)}")


@dataclass(frozen=True)
class ImageHeader:
    """What the header says, read without decoding pixels."""

    format: str
    width: int
    height: int
    #: Frames the header declares (1 for a still image).
    frames: int = 1
    #: An animation (more than one frame, or a PNG with an animation chunk), or a GIF: not a still image
    #: the modality services take as it is.
    animated: bool = False


def inspect_image(data: bytes, limits: ImageLimits = ImageLimits(), *, animated: bool = False,
                  max_frames: int = 1000) -> ImageHeader:
    """Check size, format and dimensions from the header only; raise ImageRejectedError if unacceptable.
    An animation or a GIF is refused unless `animated` (then `ImageHeader.animated` says so, with its frames
    counted up to `max_frames` + 1 and, for a GIF, its canvas grown to every frame's extent:
    services/common/animation_header.py). An APNG whose frame controls differ from the count its animation
    chunk declares is refused.

    Example::

        header = inspect_image(open("photo.jpg", "rb").read())   # ImageHeader("JPEG", 640, 480)
    """
    if not data:
        raise ImageRejectedError("image is empty (0 bytes)")
    if len(data) > limits.max_bytes:
        raise ImageRejectedError(f"image is {len(data)} bytes, over the limit of {limits.max_bytes} bytes")
    accepted = ALLOWED_FORMATS + (ANIMATED_FORMATS if animated else ())
    try:
        with Image.open(io.BytesIO(data)) as image:
            fmt, (width, height) = image.format or "", image.size
            if fmt in accepted and fmt != "GIF":  # a GIF's frames are counted from its blocks, below
                frames = int(getattr(image, "n_frames", 1))
            # an APNG's frame count is one header field: one that says 1 over several frames is still animated
            apng = getattr(image, "custom_mimetype", None) == "image/apng"
    except Image.DecompressionBombError as exc:  # Pillow's own guard trips first on absurd canvases
        raise ImageRejectedError(f"image declares too many pixels ({exc}); the limit is {limits.max_pixels}") from None
    except Exception as exc:  # Pillow raises many types for garbage input
        raise ImageRejectedError(f"image could not be decoded: not a {' or '.join(accepted)} file "
                                 f"({type(exc).__name__})") from None
    if fmt not in accepted:
        raise ImageRejectedError(f"image format {fmt or 'unknown'} is not accepted; send one of {', '.join(accepted)}")
    try:
        if fmt == "GIF":
            gif = gif_frames(data, max_frames)
            frames, width, height = gif.count, gif.width, gif.height
        declared, controls = (apng_declared_frames(data), apng_frame_controls(data)) if apng else (None, 0)
    except ValueError as exc:
        raise ImageRejectedError(f"image could not be decoded: {fmt} blocks are malformed ({exc})") from None
    if apng and declared != controls:
        raise ImageRejectedError(f"image is an APNG whose animation chunk declares {declared} frames over {controls} "
                                 f"frame controls (an error by the APNG specification: viewers disagree on what it "
                                 f"shows)")
    if width < 1 or height < 1 or width > limits.max_side or height > limits.max_side:
        raise ImageRejectedError(f"image is {width}x{height}; each side must be 1..{limits.max_side} pixels")
    if width * height > limits.max_pixels:
        raise ImageRejectedError(f"image has {width * height} pixels, over the limit of {limits.max_pixels}")
    moving = frames > 1 or apng
    if moving and not animated:
        count = f"{frames} frames" if frames > 1 else "an animation chunk"
        raise ImageRejectedError(f"image is animated ({fmt}, {count}); animated images are not accepted here: "
                                 f"send each frame a viewer sees as its own image part")
    return ImageHeader(fmt, width, height, max(frames, 1), moving or fmt in ANIMATED_FORMATS)


def flatten_alpha(image: Image.Image) -> Image.Image:
    """RGB with any transparency composited onto white.

    Dropping the alpha channel instead would turn black text on a transparent background into black
    on black: unreadable to OCR, and a way to slip text past moderation.
    """
    if image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info):
        rgba = image.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(background, rgba).convert("RGB")
    return image.convert("RGB")


def decode_rgb(data: bytes, limits: ImageLimits = ImageLimits()) -> np.ndarray:
    """Decode to an RGB uint8 array of shape (H, W, 3) after `inspect_image`'s checks.

    Truncated or corrupt pixel data raises ImageRejectedError (never a partial image).
    """
    return decode_image(data, limits)[1]


def decode_image(data: bytes, limits: ImageLimits = ImageLimits()) -> tuple[ImageHeader, np.ndarray]:
    """Like `decode_rgb`, also returning the header it checked (parsed once).

    Example::

        header, rgb = decode_image(open("photo.jpg", "rb").read())   # ImageHeader("JPEG", 640, 480), (480, 640, 3)
    """
    header = inspect_image(data, limits)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as image:
                rgb = flatten_alpha(ImageOps.exif_transpose(image))  # phone photos: score them upright
                rgb.load()
    except ImageRejectedError:
        raise
    except Exception as exc:
        raise ImageRejectedError(f"image data is corrupt or truncated ({type(exc).__name__}: {exc})") from None
    return header, np.asarray(rgb, dtype=np.uint8)
