"""The text service: KServe v2 models `text_moderation` (profile fast) and `text_semantic` (profile accurate),
and `classifier.<tenant>` for each tenant classifier in the config's `tenant_classifiers` folder
(docs/tenant-classifiers.md).

Run: `python -m services.text.server --config config/text.yaml` (see `--help`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from services.common.serving.model_api import ServedModel
from services.common.serving.modality_config import ModalityServiceConfig

if TYPE_CHECKING:
    from services.trainer.features import Encoder


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
    tenants = tenant_classifier_models(Path(config.tenant_classifiers), fast.multilingual_encoder) \
        if config.tenant_classifiers else []
    return [fast, TextSemanticModel(root, options, fast=fast), *tenants]


def tenant_classifier_models(folder: Path, encoder: Encoder) -> list[ServedModel]:
    """A served model `classifier.<tenant>` for every classifier directory in `folder` (one holding
    `classifier.json`), in name order, all reading `encoder`. ValueError when `folder` is not a directory or
    two directories hold the same tenant's classifier; ArtifactError naming a directory that does not load."""
    from services.text.tenant_classifier import TenantClassifierModel
    from services.trainer.artifact import MANIFEST_FILE

    if not folder.is_dir():
        raise ValueError(f"tenant_classifiers: {folder} is not a directory")
    models: dict[str, TenantClassifierModel] = {}
    for directory in sorted(p for p in folder.iterdir() if (p / MANIFEST_FILE).is_file()):
        model = TenantClassifierModel(directory, encoder)
        if model.name in models:
            raise ValueError(f"tenant_classifiers: {models[model.name].directory} and {directory} both hold "
                             f"{model.name}; keep one")
        models[model.name] = model
    return list(models.values())


def main(argv: Sequence[str] | None = None) -> int:
    # Imported here, not at the top: `served_models` is also used without the gRPC server stack (a Triton
    # Inference Server hosting the same models, services/common/serving/pytriton_host.py).
    from services.common.serving.modality_main import run_modality

    return run_modality("text", served_models, argv)


if __name__ == "__main__":
    raise SystemExit(main())
