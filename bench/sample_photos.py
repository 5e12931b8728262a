"""Real photos for the known-content benchmarks and tests: scikit-image's sample images (public domain and
CC0), installed as data only (requirements-data.txt; scikit-image's code is never imported).

Example::

    data = photo_bytes("coffee.png")   # PNG bytes
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

__all__ = ["PHOTOS", "photo_bytes", "sample_dir"]

#: Colour and grey photos of distinct scenes (chessboards, phantoms and flat test patterns left out).
PHOTOS = ("astronaut.png", "brick.png", "camera.png", "chelsea.png", "coffee.png", "coins.png", "grass.png",
          "gravel.png", "hubble_deep_field.jpg", "ihc.png", "moon.png", "motorcycle_left.png", "page.png",
          "retina.jpg", "rocket.jpg", "text.png", "cell.png", "clock_motion.png")


def sample_dir() -> Path:
    """Where scikit-image's sample data is installed (AssertionError naming the fix when it is not)."""
    spec = importlib.util.find_spec("skimage")
    assert spec is not None and spec.submodule_search_locations, "scikit-image's data is missing: run `make venv`"
    return Path(list(spec.submodule_search_locations)[0]) / "data"


def photo_bytes(name: str) -> bytes:
    """One sample photo's file as it is installed."""
    return (sample_dir() / name).read_bytes()
