"""Fixtures for the OCR unit tests: the real models from the model repository, loaded once.

The tests need the built repository; they fail (never skip) when it is missing, with the command
that builds it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

from services.common.serving.model_repository import DEFAULT_ROOT, ModelNotFoundError, find_model
from services.common.serving.onnx_session import SessionOptions, create_session
from services.ocr.model import MODEL_VERSIONS, OcrModel
from services.ocr.pipeline import OcrPipeline


@pytest.fixture(scope="session")
def repository() -> Path:
    try:
        for name, version in MODEL_VERSIONS.items():
            find_model(name, version, DEFAULT_ROOT)
    except ModelNotFoundError as error:
        pytest.fail(f"{error}\nBuild it: python -m services.ocr.build.build_models --repository {DEFAULT_ROOT}", pytrace=False)
    return DEFAULT_ROOT


@pytest.fixture(scope="session")
def model(repository: Path) -> OcrModel:
    return OcrModel(repository, SessionOptions(intra_op_threads=2))


@pytest.fixture(scope="session")
def pipeline(repository: Path) -> OcrPipeline:
    det, cls, rec = (create_session(str(find_model(n, v, repository).path)) for n, v in MODEL_VERSIONS.items())
    return OcrPipeline(det, cls, rec)


Reader = Callable[..., list[list[dict[str, Any]]]]


@pytest.fixture(scope="session")
def read(model: OcrModel) -> Reader:
    """`read(*encoded_images)`: the decoded LINES per image; fails the test if any ERROR is set."""

    def run(*images: bytes) -> list[list[dict[str, Any]]]:
        out = model.infer({"IMAGE": np.array([[image] for image in images], dtype=object)})
        errors = [error.decode() for error in out["ERROR"][:, 0] if error]
        if errors:
            pytest.fail(f"images rejected: {errors}")
        return [json.loads(lines) for lines in out["LINES"][:, 0]]

    return run
