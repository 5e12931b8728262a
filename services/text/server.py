"""The text service: KServe v2 model `text_moderation` (normalisation, blocklist, toxicity and spam).

Run: `python -m services.text.server --config config/text.yaml` (see `--help`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from services.common.serving.model_api import ServedModel
from services.common.serving.modality_config import ModalityServiceConfig


def build_models(config: ModalityServiceConfig) -> Sequence[ServedModel]:
    """The models this service serves, loaded from the configured repository."""
    from services.text.model import TextModerationModel

    return [TextModerationModel(Path(config.model_repository), config.onnxruntime.session_options())]


def main(argv: Sequence[str] | None = None) -> int:
    # Imported here, not at the top: `build_models` is also used without the gRPC server stack (a Triton
    # Inference Server hosting the same models, services/common/serving/pytriton_host.py).
    from services.common.serving.modality_main import run_modality

    return run_modality("text", build_models, argv)


if __name__ == "__main__":
    raise SystemExit(main())
