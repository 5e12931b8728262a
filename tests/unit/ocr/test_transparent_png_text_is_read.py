"""Regression: black text on a transparent PNG used to decode as black on black and read as nothing,
a way to slip text past moderation. Transparency is now composited onto white before OCR."""

from __future__ import annotations

import io
from typing import Any, Callable

from PIL import Image, ImageDraw, ImageFont

from bench.render import FONT_PATH


def transparent_png(text: str) -> bytes:
    image = Image.new("RGBA", (480, 120), (0, 0, 0, 0))
    ImageDraw.Draw(image).text((20, 30), text, fill=(0, 0, 0, 255), font=ImageFont.truetype(str(FONT_PATH), 40))
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    return buffer.getvalue()


def test_black_text_on_transparent_background_is_read(read: Callable[..., list[list[dict[str, Any]]]]) -> None:
    lines = read(transparent_png("Free prize now"))[0]
    assert [line["text"] for line in lines] == ["Free prize now"]
