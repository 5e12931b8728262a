"""The text service: KServe v2 models `text_moderation` (profile fast) and `text_semantic` (profile accurate),
and `classifier.<tenant>` for each tenant classifier in the config's `tenant_classifiers` folder
(docs/tenant-classifiers.md). RepositoryModelLoad of `classifier.<tenant>` loads (or reloads) that tenant's
classifier from the folder as it is now, without a restart: one trained after the service started too.

Run: `python -m services.text.server --config config/text.yaml` (see `--help`).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Sequence

from services.common.contracts.classifier import MANIFEST_FILE, MODEL_PREFIX
from services.common.errors import NotFoundError
from services.common.serving.model_api import ServedModel
from services.common.serving.modality_config import ModalityServiceConfig

if TYPE_CHECKING:
    from services.trainer.features import Encoder

log = logging.getLogger("services.text")


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
    `classifier.json`), in name order, all reading `encoder`; a missing `folder` is created (empty: none yet).
    ValueError when `folder` is not a directory or two directories hold the same tenant's classifier;
    ArtifactError naming a directory that does not load. The trainer's code (and scipy) is imported only
    when there is a classifier to load (a Triton host's environment has neither)."""
    if not folder.exists():
        folder.mkdir(parents=True, exist_ok=True)
        log.info("tenant_classifiers: created %s (empty: no tenant classifier yet)", folder)
    if not folder.is_dir():
        raise ValueError(f"tenant_classifiers: {folder} is not a directory")
    directories = sorted(p for p in folder.iterdir() if (p / MANIFEST_FILE).is_file())
    if not directories:
        return []
    from services.text.tenant_classifier import TenantClassifierModel

    models: dict[str, TenantClassifierModel] = {}
    for directory in directories:
        model = TenantClassifierModel(directory, encoder)
        if model.name in models:
            raise ValueError(f"tenant_classifiers: {models[model.name].directory} and {directory} both hold "
                             f"{model.name}; keep one")
        models[model.name] = model
    return list(models.values())


def load_tenant_classifier(config: ModalityServiceConfig, name: str, serving: Mapping[str, ServedModel]) -> ServedModel | None:
    """`classifier.<tenant>` from the `tenant_classifiers` folder as it is now, sharing the serving
    `text_moderation`'s multilingual encoder (RepositoryModelLoad; `modality_main.ModelLoader`); None for
    any other name. NotFoundError when no directory there holds that tenant's classifier; ArtifactError
    naming the file when it does not load."""
    from services.text.tenant_classifier import TenantClassifierModel
    from services.trainer.artifact import read_manifest

    if not name.startswith(MODEL_PREFIX):
        return None
    if not config.tenant_classifiers:
        raise NotFoundError(f"model {name!r}: this text service serves no tenant classifiers (set tenant_classifiers "
                            f"in its config)")
    folder = Path(config.tenant_classifiers)
    tenant = name[len(MODEL_PREFIX):]
    holding = [p for p in sorted(folder.iterdir()) if (p / MANIFEST_FILE).is_file()
               and read_manifest(p).get("tenant") == tenant] if folder.is_dir() else []
    if not holding:
        raise NotFoundError(f"model {name!r}: no classifier for tenant {tenant!r} in {folder}")
    if len(holding) > 1:
        raise NotFoundError(f"model {name!r}: {holding[0]} and {holding[1]} both hold it; keep one")
    fast = serving.get("text_moderation")
    encoder = getattr(fast, "multilingual_encoder", None)
    if encoder is None:
        raise NotFoundError(f"model {name!r}: text_moderation is not serving, and the classifier reads its encoder")
    return TenantClassifierModel(holding[0], encoder)


def main(argv: Sequence[str] | None = None) -> int:
    # Imported here, not at the top: `served_models` is also used without the gRPC server stack (a Triton
    # Inference Server hosting the same models, services/common/serving/pytriton_host.py).
    from services.common.serving.modality_main import run_modality

    return run_modality("text", served_models, argv, loader=load_tenant_classifier)


if __name__ == "__main__":
    raise SystemExit(main())
