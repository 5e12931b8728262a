"""services/vision/networks.py: opening the ONNX models and refusing a stale repository."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from services.common.image_decode import decode_rgb
from services.common.serving.model_repository import ModelNotFoundError
from services.common.serving.onnx_session import SessionOptions
from services.vision.networks import IMAGE_SAFETY_S, OPENNSFW, RepositoryMismatchError, load_network


def _copy_config_only(repository: Path, target: Path, name: str) -> Path:
    """A repository at `target` whose `name` model links to the real ONNX file but has its own config."""
    (target / name / "1").mkdir(parents=True)
    (target / name / "1" / "model.onnx").symlink_to((repository / name / "1" / "model.onnx").resolve())
    shutil.copyfile(repository / name / "config.json", target / name / "config.json")
    return target / name / "config.json"


def _edit(config_path: Path, **changes: object) -> None:
    config = json.loads(config_path.read_text())
    config["versions"]["1"].update(changes)
    config_path.write_text(json.dumps(config))


def test_networks_return_class_probabilities(repository: Path, china_jpeg: bytes) -> None:
    rgb = decode_rgb(china_jpeg)
    for spec, classes in ((OPENNSFW, ("sfw", "nsfw")), (IMAGE_SAFETY_S, ("NSFL", "NSFW", "SFW"))):
        network = load_network(repository, spec, SessionOptions())
        assert network.classes == classes
        probs = network.run([rgb, rgb])
        assert probs.shape == (2, len(classes)) and probs.dtype == np.float32
        np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=1e-4)


def test_missing_model_raises_model_not_found(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFoundError, match="opennsfw"):
        load_network(tmp_path, OPENNSFW, SessionOptions())


def test_stale_preprocess_id_is_refused(repository: Path, tmp_path: Path) -> None:
    config_path = _copy_config_only(repository, tmp_path, "opennsfw")
    _edit(config_path, preprocess="opennsfw_v0")
    with pytest.raises(RepositoryMismatchError, match="preprocess is 'opennsfw_v0'"):
        load_network(tmp_path, OPENNSFW, SessionOptions())


def test_wrong_tensor_name_is_refused(repository: Path, tmp_path: Path) -> None:
    config_path = _copy_config_only(repository, tmp_path, "image_safety_s")
    _edit(config_path, inputs=[{"name": "pixels", "datatype": "FP32", "shape": [-1, 3, 224, 224]}])
    with pytest.raises(RepositoryMismatchError, match="tensors"):
        load_network(tmp_path, IMAGE_SAFETY_S, SessionOptions())


def test_incomplete_config_is_refused(repository: Path, tmp_path: Path) -> None:
    config_path = _copy_config_only(repository, tmp_path, "image_safety_s")
    config = json.loads(config_path.read_text())
    del config["versions"]["1"]["calibration"]
    config_path.write_text(json.dumps(config))
    with pytest.raises(RepositoryMismatchError, match="incomplete"):
        load_network(tmp_path, IMAGE_SAFETY_S, SessionOptions())
