"""The OCR service: KServe v2 model `ocr` (PP-OCRv6 lines with text, confidence and polygon).

Run: `python -m services.ocr.server --config config/ocr.yaml` (see `--help`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from services.common.serving.modality_main import run_modality
from services.common.serving.model_api import ServedModel
from services.common.serving.modality_config import ModalityServiceConfig


def served_models(config: ModalityServiceConfig) -> Sequence[ServedModel]:
    """The models this service serves, loaded from the configured repository."""
    from services.ocr.model import OcrModel

    return [OcrModel(Path(config.model_repository), config.onnxruntime.session_options(),
                     limits=config.limits.image_limits())]


def main(argv: Sequence[str] | None = None) -> int:
    return run_modality("ocr", served_models, argv)


if __name__ == "__main__":
    raise SystemExit(main())
