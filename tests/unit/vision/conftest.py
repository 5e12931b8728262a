"""Fixtures for the vision tests: the model repository (which must have been built) and sample images."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from services.common.serving.model_repository import DEFAULT_ROOT
from services.common.serving.onnx_session import SessionOptions
from services.vision.model import ImageSafetyModel

BUILD_HINT = "python -m services.vision.build.build_models --repository model_repository (or `make models`)"


def _sklearn_image(name: str) -> Path:
    spec = importlib.util.find_spec("sklearn")
    if spec is None or not spec.submodule_search_locations:
        pytest.fail("scikit-learn is not installed; it ships the sample photos these tests use (requirements.txt)")
    return Path(list(spec.submodule_search_locations)[0]) / "datasets" / "images" / name


@pytest.fixture(scope="session")
def repository() -> Path:
    """The built model repository; fails (never skips) when the vision models are missing."""
    for name in ("opennsfw", "image_safety_s"):
        if not (DEFAULT_ROOT / name / "config.json").is_file():
            pytest.fail(f"model repository {DEFAULT_ROOT} has no {name!r}: build it with {BUILD_HINT}")
    return DEFAULT_ROOT


@pytest.fixture(scope="session")
def model(repository: Path) -> ImageSafetyModel:
    return ImageSafetyModel(repository, SessionOptions(intra_op_threads=2))


@pytest.fixture(scope="session")
def china_jpeg() -> bytes:
    """scikit-learn's sample photo of a Chinese temple (640x427 JPEG): a benign real photograph."""
    return _sklearn_image("china.jpg").read_bytes()


@pytest.fixture(scope="session")
def flower_jpeg() -> bytes:
    """scikit-learn's sample photo of a flower (640x427 JPEG)."""
    return _sklearn_image("flower.jpg").read_bytes()
