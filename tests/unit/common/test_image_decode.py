"""services/common/image_decode.py: header checks before decoding, format allow-list, corrupt data."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from PIL import Image

from services.common.image_decode import ImageHeader, ImageLimits, decode_rgb, inspect_image
from services.common.errors import ImageRejectedError
from tests.stubs import encode_image, png_declaring


def _photo(width: int = 64, height: int = 48) -> Image.Image:
    rng = np.random.default_rng(0)
    return Image.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8))


@pytest.mark.parametrize("fmt", ["JPEG", "PNG", "WEBP"])
def test_allowed_formats_decode_to_rgb(fmt: str) -> None:
    data = encode_image(_photo(64, 48), fmt)
    assert inspect_image(data) == ImageHeader(fmt, 64, 48)
    rgb = decode_rgb(data)
    assert rgb.shape == (48, 64, 3) and rgb.dtype == np.uint8


@pytest.mark.parametrize("mode", ["L", "LA", "P", "RGBA", "I;16", "1"])
def test_other_pixel_modes_become_rgb(mode: str) -> None:
    image = _photo(20, 10).convert(mode) if mode != "I;16" else Image.new("I;16", (20, 10), 1000)
    assert decode_rgb(encode_image(image, "PNG")).shape == (10, 20, 3)


def test_lossless_png_pixels_are_exact() -> None:
    image = _photo(33, 17)
    np.testing.assert_array_equal(decode_rgb(encode_image(image, "PNG")), np.asarray(image))


@pytest.mark.parametrize("fmt", ["PNG", "WEBP"])
def test_animated_images_are_refused_from_the_header(fmt: str) -> None:
    # a benign first frame must not carry the frames a viewer sees after it through moderation
    frames = [Image.new("RGB", (16, 16), colour) for colour in ((255, 255, 255), (0, 0, 255), (255, 0, 0))]
    data = encode_image(frames[0], fmt, save_all=True, append_images=frames[1:], duration=100, loop=0)
    for check in (inspect_image, decode_rgb):
        with pytest.raises(ImageRejectedError, match=f"animated \\({fmt}, 3 frames\\).*its own image part"):
            check(data)
    still = encode_image(frames[0], fmt, save_all=True)   # one frame, written by the same animation writer
    assert tuple(decode_rgb(still)[0, 0]) == (255, 255, 255)


def test_an_apng_whose_header_claims_one_frame_over_three_is_refused() -> None:
    frames = [Image.new("RGB", (16, 16), colour) for colour in ((255, 255, 255), (0, 0, 255), (255, 0, 0))]
    data = bytearray(encode_image(frames[0], "PNG", save_all=True, append_images=frames[1:], duration=100, loop=0))
    at = data.index(b"acTL")   # length (4) | type (4) | num_frames (4) | num_plays (4) | crc (4)
    data[at + 4:at + 8] = (1).to_bytes(4, "big")
    data[at + 12:at + 16] = zlib.crc32(bytes(data[at:at + 12])).to_bytes(4, "big")
    with pytest.raises(ImageRejectedError, match="declares 1 frames over 3 frame controls"):
        inspect_image(bytes(data))


@pytest.mark.parametrize("fmt", ["PNG", "WEBP", "GIF"])
def test_where_animations_are_accepted_the_header_says_how_many_frames(fmt: str) -> None:
    frames = [Image.new("RGB", (16, 16), colour) for colour in ((255, 255, 255), (0, 0, 255), (255, 0, 0))]
    data = encode_image(frames[0], fmt, save_all=True, append_images=frames[1:], duration=100, loop=0)
    assert inspect_image(data, animated=True) == ImageHeader(fmt, 16, 16, 3, True)
    assert inspect_image(encode_image(frames[0], "JPEG"), animated=True) == ImageHeader("JPEG", 16, 16, 1, False)
    if fmt == "PNG":  # an APNG whose header claims one frame over three: refused where animations are taken too
        claims_one = bytearray(data)
        at = claims_one.index(b"acTL")
        claims_one[at + 4:at + 8] = (1).to_bytes(4, "big")
        claims_one[at + 12:at + 16] = zlib.crc32(bytes(claims_one[at:at + 12])).to_bytes(4, "big")
        with pytest.raises(ImageRejectedError, match="declares 1 frames over 3 frame controls"):
            inspect_image(bytes(claims_one), animated=True)


@pytest.mark.parametrize("fmt", ["GIF", "BMP", "TIFF", "ICO"])
def test_formats_outside_the_allow_list_are_rejected(fmt: str) -> None:
    with pytest.raises(ImageRejectedError, match=f"format {fmt} is not accepted"):
        decode_rgb(encode_image(Image.new("RGB", (32, 32)), fmt))


def test_empty_and_garbage_are_rejected() -> None:
    with pytest.raises(ImageRejectedError, match="empty"):
        inspect_image(b"")
    with pytest.raises(ImageRejectedError, match="could not be decoded"):
        inspect_image(b"this is not an image at all")


@pytest.mark.parametrize("fmt", ["JPEG", "PNG"])
def test_truncated_data_is_rejected_not_partially_decoded(fmt: str) -> None:
    data = encode_image(_photo(256, 256), fmt)
    truncated = data[: len(data) // 2]
    inspect_image(truncated)  # the header alone is fine
    with pytest.raises(ImageRejectedError, match="corrupt or truncated"):
        decode_rgb(truncated)


def test_byte_limit_is_checked_before_parsing() -> None:
    with pytest.raises(ImageRejectedError, match="over the limit of 100 bytes"):
        inspect_image(b"\xff" * 101, ImageLimits(max_bytes=100))


def test_side_limit() -> None:
    data = encode_image(Image.new("RGB", (300, 20)), "PNG")
    with pytest.raises(ImageRejectedError, match="300x20; each side must be 1..256"):
        decode_rgb(data, ImageLimits(max_side=256))


def test_decompression_bomb_is_rejected_from_the_header() -> None:
    bomb = png_declaring(8000, 8000)  # 89 bytes declaring 64 Mpixel (sides within max_side)
    assert len(bomb) < 200
    with pytest.raises(ImageRejectedError, match="64000000 pixels, over the limit of 40000000"):
        decode_rgb(bomb)


@pytest.mark.parametrize("size", [(20000, 20000), (50000, 50000)])
def test_canvas_over_pillows_own_bomb_limit_is_reported_as_too_many_pixels(size: tuple[int, int]) -> None:
    with pytest.raises(ImageRejectedError, match="too many pixels"):
        decode_rgb(png_declaring(*size))


def test_transparency_is_composited_onto_white() -> None:
    rgba = np.zeros((8, 8, 4), np.uint8)  # transparent black ...
    rgba[:4, :, 3] = 255  # ... except an opaque black top half
    rgb = decode_rgb(encode_image(Image.fromarray(rgba), "PNG"))
    assert (rgb[:4] == 0).all() and (rgb[4:] == 255).all()


@pytest.mark.parametrize("field", ["max_bytes", "max_side", "max_pixels"])
def test_limits_validation_names_the_field(field: str) -> None:
    with pytest.raises(ValueError, match=f"ImageLimits.{field} must be >= 1, got 0"):
        ImageLimits(**{field: 0})
