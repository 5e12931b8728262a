"""The vision service: KServe v2 model `image_safety` (sexual content and gore scores per image).

Run: `python -m services.vision.server --config config/vision.yaml` (see `--help`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from services.common.serving.modality_main import run_modality
from services.common.serving.model_api import ServedModel
from services.common.serving.modality_config import ModalityServiceConfig


def served_models(config: ModalityServiceConfig) -> Sequence[ServedModel]:
    """The models this service serves, loaded from the configured repository."""
    from services.vision.model import ImageSafetyModel

    return [ImageSafetyModel(Path(config.model_repository), config.onnxruntime.session_options(),
                             limits=config.limits.image_limits())]


def main(argv: Sequence[str] | None = None) -> int:
    return run_modality("vision", served_models, argv)


if __name__ == "__main__":
    raise SystemExit(main())
