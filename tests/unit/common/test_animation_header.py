"""An animation's blocks read without decoding (services/common/animation_header.py), on files Pillow writes and
on hand-altered ones."""

from __future__ import annotations

import io
import struct

import pytest
from PIL import Image

from services.common.animation_header import GifFrames, apng_frame_controls, gif_frames


def animated(fmt: str, count: int, size: tuple[int, int] = (16, 12)) -> bytes:
    frames = [Image.new("RGB", size, (i * 40 % 256, 0, 0)) for i in range(count)]
    out = io.BytesIO()
    frames[0].save(out, fmt, save_all=True, append_images=frames[1:], duration=50, loop=0)
    return out.getvalue()


def test_a_gifs_frames_and_canvas_are_read_from_its_blocks() -> None:
    assert gif_frames(animated("GIF", 5), cap=100) == GifFrames(5, 16, 12)
    assert gif_frames(animated("GIF", 5), cap=3).count == 4  # stops after the cap: one past it says "over"
    data = animated("GIF", 2)
    at = data.rindex(b",")  # the second image descriptor: a frame larger than the screen grows the canvas
    grown = data[:at + 5] + struct.pack("<HH", 300, 200) + data[at + 9:]
    assert (gif_frames(grown, cap=100).width, gif_frames(grown, cap=100).height) == (300, 200)


def test_a_gif_of_half_a_million_frames_is_counted_to_its_cap() -> None:
    one = animated("GIF", 1)
    flags = one[10]
    start = 13 + (3 << ((flags & 7) + 1) if flags & 0x80 else 0)
    image = one[one.index(b",", start):-1]  # an image descriptor and its data
    data = one[:start] + image * 500_000 + b";"
    assert gif_frames(data, cap=1000).count == 1001  # one past the cap: over it, whatever follows


@pytest.mark.parametrize("data", [b"GIF89a", animated("GIF", 3)[:-40], b"GIF89a" + bytes(7) + b"\x99" * 2000])
def test_a_malformed_gif_is_a_value_error(data: bytes) -> None:
    with pytest.raises(ValueError):
        gif_frames(data, cap=10)


def test_the_frames_are_counted_as_pillow_reads_them() -> None:
    data = animated("GIF", 3)
    assert gif_frames(data[:-1], cap=10).count == 3  # no trailer: the frames read so far
    at = data.index(b",")  # a few stray bytes before the first frame: skipped, as Pillow skips them
    assert gif_frames(data[:at] + b"\x00\x01" + data[at:], cap=10).count == 3
    # an extension whose first sub-block is empty: Pillow reads the sub-blocks after it as the extension's too,
    # so a frame hidden there is no frame to Pillow, and none here
    hidden = data[:at] + b"\x21\xf9\x00" + b"\x03abc\x00" + data[at:]
    assert gif_frames(hidden, cap=10).count == getattr(Image.open(io.BytesIO(hidden)), "n_frames") == 3


def test_an_apngs_frame_controls_are_counted() -> None:
    data = animated("PNG", 3)
    assert apng_frame_controls(data) == 3
    still = io.BytesIO()
    Image.new("RGB", (4, 4)).save(still, "PNG")
    assert apng_frame_controls(still.getvalue()) == 0
    with pytest.raises(ValueError, match="not a PNG"):
        apng_frame_controls(b"nope")
