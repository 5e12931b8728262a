"""Real photos for the match service's tests (bench/sample_photos.py: scikit-image's sample images), and the
ways people re-post them."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageEnhance

from bench.sample_photos import PHOTOS, photo_bytes, sample_dir

__all__ = ["PHOTOS", "encoded", "photo_bytes", "photos", "rgb", "sample_dir", "variants"]


def encoded(image: Image.Image, fmt: str = "PNG", **options: object) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, fmt, **options)
    return buffer.getvalue()


def variants(data: bytes) -> dict[str, bytes]:
    """An image re-posted the ways people re-post: resized, re-encoded, cropped, brightened, watermarked."""
    image = Image.open(io.BytesIO(data)).convert("RGB")
    width, height = image.size
    marked = image.copy()
    ImageDraw.Draw(marked).text((width // 20, height - height // 10), "@reposter 2026", fill=(255, 255, 255))
    return {
        "resized_half": encoded(image.resize((width // 2, height // 2))),
        "jpeg_60": encoded(image, "JPEG", quality=60),
        # 1 % off each side: PDQ is sensitive to crops (2 % a side moved these photos by 30-50 bits, past 31)
        "cropped_1pct_a_side": encoded(image.crop((width // 100, height // 100, width - width // 100, height - height // 100))),
        "brighter": encoded(ImageEnhance.Brightness(image).enhance(1.2)),
        "watermarked": encoded(marked, "JPEG", quality=85),
    }


def rgb(data: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))


@pytest.fixture(scope="session")
def photos() -> dict[str, bytes]:
    return {name: photo_bytes(name) for name in PHOTOS}
