"""The text service: KServe v2 models `text_moderation` (profile fast) and `text_semantic` (profile accurate).

Run: `python -m services.text.server --config config/text.yaml` (see `--help`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from services.common.serving.model_api import ServedModel
from services.common.serving.modality_config import ModalityServiceConfig


def repository_models() -> tuple[str, ...]:
    """Every model-repository entry `served_models` opens, e.g. to build a repository copy.

    Example::

        >>> "text_heads_fast" in repository_models() and "minilm_l6" in repository_models()
        True
    """
    from services.text.semantic import REPOSITORY_MODELS

    return REPOSITORY_MODELS


def served_models(config: ModalityServiceConfig) -> Sequence[ServedModel]:
    """The models this service serves, loaded from the configured repository (both share one fast path)."""
    from services.text.model import TextModerationModel
    from services.text.semantic import TextSemanticModel

    root, options = Path(config.model_repository), config.onnxruntime.session_options()
    fast = TextModerationModel(root, options)
    return [fast, TextSemanticModel(root, options, fast=fast)]


def main(argv: Sequence[str] | None = None) -> int:
    # Imported here, not at the top: `served_models` is also used without the gRPC server stack (a Triton
    # Inference Server hosting the same models, services/common/serving/pytriton_host.py).
    from services.common.serving.modality_main import run_modality

    return run_modality("text", served_models, argv)


if __name__ == "__main__":
    raise SystemExit(main())
