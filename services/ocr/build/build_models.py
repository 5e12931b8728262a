"""Install the OCR models shipped in the rapidocr wheel into the model repository.

Three ONNX files from `rapidocr/models/` become `ppocr_det`, `ppocr_rec` and `ppocr_cls`, version 1,
each with its source, licence, SHA-256, tensor names/shapes and the settings the OCR service uses
with it (detector resize and thresholds, recogniser input shape and dictionary location).

Usage::

    python -m services.ocr.build.build_models --repository model_repository
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.resources
from pathlib import Path
from typing import Any, Sequence

from services.common.serving.model_repository import DEFAULT_ROOT, RepositoryEntry, install_model
from services.common.serving.onnx_session import create_session
from services.ocr.detection import MAX_CANDIDATES, MEAN, STD
from services.ocr.recognition import CHARACTER_KEY, CLS_IMAGE_SHAPE, CLS_LABELS, REC_IMAGE_SHAPE
from services.ocr.settings import OcrSettings

VERSION = "1"
LICENSE = "Apache-2.0"
PACKAGE = "rapidocr"
MODELS = {
    "ppocr_det": "PP-OCRv6_det_small.onnx",
    "ppocr_rec": "PP-OCRv6_rec_small.onnx",
    "ppocr_cls": "ch_ppocr_mobile_v2.0_cls_mobile.onnx",
}


def _settings_extra(name: str) -> dict[str, Any]:
    settings = OcrSettings()
    if name == "ppocr_det":
        return {"detector": {"limit_side_len": settings.limit_side_len, "limit_type": settings.limit_type,
                             "mean": list(MEAN), "std": list(STD), "thresh": settings.det_thresh,
                             "box_thresh": settings.box_thresh, "unclip_ratio": settings.unclip_ratio,
                             "max_candidates": MAX_CANDIDATES, "score_mode": "fast", "use_dilation": True}}
    if name == "ppocr_rec":
        return {"recognizer": {"image_shape": list(REC_IMAGE_SHAPE), "dictionary": f"onnx metadata key {CHARACTER_KEY!r}",
                               "decoder": "CTC (blank=0, space appended)"}}
    return {"classifier": {"image_shape": list(CLS_IMAGE_SHAPE), "labels": list(CLS_LABELS),
                           "thresh": settings.cls_thresh}}


def _tensors(path: Path) -> dict[str, Any]:
    session = create_session(str(path))

    def describe(args: Sequence[Any]) -> list[dict[str, Any]]:
        return [{"name": a.name, "type": a.type, "shape": [d if isinstance(d, int) else -1 for d in a.shape]}
                for a in args]

    return {"inputs": describe(session.get_inputs()), "outputs": describe(session.get_outputs())}


def build(repository: Path) -> list[RepositoryEntry]:
    """Install the three OCR models under `repository`; return their entries.

    Example::

        entries = build(Path("model_repository"))   # ppocr_det, ppocr_rec, ppocr_cls, version "1"
    """
    version = importlib.metadata.version(PACKAGE)
    models_dir = Path(str(importlib.resources.files(PACKAGE) / "models"))
    entries = []
    for name, filename in MODELS.items():
        source_file = models_dir / filename
        if not source_file.is_file():
            raise FileNotFoundError(f"{source_file} is missing: reinstall {PACKAGE}=={version}")
        extra = {**_tensors(source_file), **_settings_extra(name)}
        entries.append(install_model(repository, name, VERSION, source_file,
                                     source=f"{PACKAGE}=={version}:{PACKAGE}/models/{filename}",
                                     license=LICENSE, extra=extra))
    return entries


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Install the OCR models from the rapidocr wheel.")
    parser.add_argument("--repository", type=Path, default=DEFAULT_ROOT, help="model repository root")
    args = parser.parse_args(argv)
    for entry in build(args.repository):
        print(f"{entry.name}/{entry.version}: {entry.path} sha256={entry.sha256[:12]} ({entry.source})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
