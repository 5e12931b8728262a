from __future__ import annotations

import json
from pathlib import Path

from services.common.serving.model_repository import find_model, sha256_of
from services.ocr.build.build_models import main


def test_installs_three_models_with_provenance_tensors_and_settings(tmp_path: Path) -> None:
    assert main(["--repository", str(tmp_path)]) == 0
    det = find_model("ppocr_det", "1", tmp_path)
    assert det.source == "rapidocr==3.10.0:rapidocr/models/PP-OCRv6_det_small.onnx" and det.license == "Apache-2.0"
    assert det.sha256 == sha256_of(det.path)
    assert det.extra["inputs"] == [{"name": "x", "type": "tensor(float)", "shape": [-1, 3, -1, -1]}]
    assert det.extra["detector"]["limit_type"] == "max" and det.extra["detector"]["limit_side_len"] == 960
    rec = find_model("ppocr_rec", "1", tmp_path)
    assert rec.extra["inputs"][0]["shape"] == [-1, 3, 48, -1]
    assert rec.extra["recognizer"]["image_shape"] == [3, 48, 320]
    cls = find_model("ppocr_cls", "1", tmp_path)
    assert cls.source.endswith("ch_ppocr_mobile_v2.0_cls_mobile.onnx") and cls.extra["classifier"]["labels"] == ["0", "180"]
    config = json.loads((tmp_path / "ppocr_det" / "config.json").read_text())
    assert config["default_version"] == "1"
