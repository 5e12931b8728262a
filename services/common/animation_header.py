"""What an animation's blocks say, read without decoding a pixel: a GIF's frames and their extents, an APNG's
frame controls. Pure; bounded work (a walk over the file's block headers, stopping at a frame cap).

Pillow's own frame count for a GIF walks every frame (0.9 s for a 10 MiB file of 419,429 one-pixel frames),
and its decoder grows the canvas to fit a frame larger than the screen the header declares (a 16 x 16 GIF
whose frames are 9,000 x 9,000 decodes 1.5 GB). `gif_frames` reads both from the blocks, stopping after
`cap` frames, so a frame bomb is refused before anything is decoded. `apng_frame_controls` counts an APNG's
frame control chunks: a count that differs from the one its animation chunk declares is an error by the
APNG specification, and decoders disagree on what it shows.

Example::

    gif_frames(open("cat.gif", "rb").read(), cap=1000)   # GifFrames(count=24, width=480, height=270)
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

__all__ = ["GifFrames", "apng_declared_frames", "apng_frame_controls", "gif_frames"]

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: Bytes between blocks that are no block, skipped as Pillow skips them, at most this many in a file.
MAX_STRAY_BYTES = 1024


@dataclass(frozen=True)
class GifFrames:
    """Frames counted (at most the cap + 1), and the canvas they need: the screen, grown to every frame's extent."""

    count: int
    width: int
    height: int


def gif_frames(data: bytes, cap: int) -> GifFrames:
    """The frames of the GIF `data` (ValueError for a malformed block structure), counting at most `cap` + 1."""
    if data[:3] != b"GIF" or len(data) < 13:
        raise ValueError("not a GIF")
    width, height, flags = struct.unpack_from("<HHB", data, 6)
    position = 13 + (3 << ((flags & 7) + 1) if flags & 0x80 else 0)
    count = 0
    stray = 0
    while count <= cap:
        if position >= len(data):  # no trailer: viewers (and Pillow) show the frames read so far
            break
        block = data[position]
        if block == 0x3B:  # trailer
            break
        if block not in (0x21, 0x2C):  # Pillow skips a byte it does not know between blocks: so does this, a few
            stray += 1
            if stray > MAX_STRAY_BYTES:
                raise ValueError(f"more than {MAX_STRAY_BYTES} bytes between blocks that are no block")
            position += 1
            continue
        if block == 0x21:  # extension: label, then sub-blocks
            if position + 2 >= len(data):
                raise ValueError("truncated extension")
            label, first = data[position + 1], data[position + 2]
            position = _skip_sub_blocks(data, position + 2)
            if first == 0 and label != 0xFE:
                # as Pillow reads it: an empty first sub-block of any extension but a comment is followed by
                # more sub-blocks (so the frames Pillow decodes are the frames counted here)
                position = _skip_sub_blocks(data, position)
        elif block == 0x2C:  # image descriptor: left, top, width, height, flags; optional local colour table
            if position + 10 > len(data):
                raise ValueError("truncated image descriptor")
            left, top, frame_width, frame_height, local = struct.unpack_from("<HHHHB", data, position + 1)
            width, height = max(width, left + frame_width), max(height, top + frame_height)
            position += 10 + (3 << ((local & 7) + 1) if local & 0x80 else 0)
            position = _skip_sub_blocks(data, position + 1)  # LZW minimum code size, then the image data
            count += 1
    return GifFrames(count, width, height)


def _skip_sub_blocks(data: bytes, position: int) -> int:
    """The position after the sub-blocks starting at `position` (each a length byte and that many bytes; 0 ends)."""
    while True:
        if position >= len(data):
            raise ValueError("truncated data sub-blocks")
        size = data[position]
        position += 1 + size
        if size == 0:
            return position


def apng_declared_frames(data: bytes) -> int | None:
    """The frame count the PNG `data`'s animation chunk (acTL) declares, or None without one."""
    if data[:8] != _PNG_SIGNATURE:
        raise ValueError("not a PNG")
    position = 8
    while position + 8 <= len(data):
        length, kind = struct.unpack_from(">I4s", data, position)
        if kind == b"acTL" and length >= 8 and position + 12 <= len(data):
            return int(struct.unpack_from(">I", data, position + 8)[0])
        if kind in (b"IDAT", b"IEND"):
            return None
        position += 12 + length
    return None


def apng_frame_controls(data: bytes) -> int:
    """How many frame control chunks (fcTL) the PNG `data` holds (ValueError for a malformed chunk structure)."""
    if data[:8] != _PNG_SIGNATURE:
        raise ValueError("not a PNG")
    position, controls = 8, 0
    while position + 8 <= len(data):
        length, kind = struct.unpack_from(">I4s", data, position)
        if kind == b"fcTL":
            controls += 1
        elif kind == b"IEND":
            return controls
        position += 12 + length
    return controls
