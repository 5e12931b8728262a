"""The text service: KServe v2 models `text_moderation` (profile fast) and `text_semantic` (profile accurate),
and `classifier.<tenant>.<version>` for each tenant classifier in the config's `tenant_classifiers` folder
(docs/tenant-classifiers.md). RepositoryModelLoad of `classifier.<tenant>.<version>` loads that classifier
from the folder as it is now, without a restart: one trained after the service started too. Versions are
separate models, so loading a new one never replaces the one a policy reads.

Run: `python -m services.text.server --config config/text.yaml` (see `--help`).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Sequence

from services.common.contracts.classifier import MANIFEST_FILE, MODEL_PREFIX, parse_model_name
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


def classifier_directories(folder: Path) -> list[Path]:
    """Every classifier directory in `folder`: `folder/<name>/` or `folder/<tenant>/<version>/` (what
    `auditmesh classifier train` writes), holding a manifest; in path order. Directories being written
    (names starting with '.') are skipped."""
    found = []
    for first in sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")):
        if (first / MANIFEST_FILE).is_file():
            found.append(first)
            continue
        found.extend(sorted(p for p in first.iterdir()
                            if p.is_dir() and not p.name.startswith(".") and (p / MANIFEST_FILE).is_file()))
    return found


def tenant_classifier_models(folder: Path, encoder: Encoder) -> list[ServedModel]:
    """A served model `classifier.<tenant>.<version>` for every classifier directory in `folder`
    (`classifier_directories`), all reading `encoder`; a missing `folder` is created (empty: none yet).
    A directory that does not load is logged and skipped (it never stops the service: text moderation
    does not depend on one tenant's classifier); two directories holding the same version serve it once.
    ValueError when `folder` is not a directory. The trainer's code (and scipy) is imported only when
    there is a classifier to load (a Triton host's environment has neither)."""
    if not folder.exists():
        folder.mkdir(parents=True, exist_ok=True)
        log.info("tenant_classifiers: created %s (empty: no tenant classifier yet)", folder)
    if not folder.is_dir():
        raise ValueError(f"tenant_classifiers: {folder} is not a directory")
    directories = classifier_directories(folder)
    if not directories:
        return []
    from services.text.tenant_classifier import TenantClassifierModel
    from services.trainer.artifact import ArtifactError

    models: dict[str, TenantClassifierModel] = {}
    for directory in directories:
        try:
            model = TenantClassifierModel(directory, encoder)
        except (ArtifactError, ValueError) as error:
            log.error("tenant_classifiers: %s not served: %s", directory, error)
            continue
        if model.name in models:
            log.warning("tenant_classifiers: %s and %s both hold %s; serving the first", models[model.name].directory,
                        directory, model.name)
            continue
        models[model.name] = model
    return list(models.values())


def load_tenant_classifier(config: ModalityServiceConfig, name: str, serving: Mapping[str, ServedModel]) -> ServedModel | None:
    """`classifier.<tenant>.<version>` from the `tenant_classifiers` folder as it is now, sharing the serving
    `text_moderation`'s multilingual encoder (RepositoryModelLoad; `modality_main.ModelLoader`); None for
    any other name. NotFoundError when no directory there holds that tenant's classifier at that version
    (a directory whose manifest cannot be read is skipped, so one tenant's broken directory never blocks
    another's); ArtifactError naming the file when the one found does not load."""
    from services.text.tenant_classifier import TenantClassifierModel
    from services.trainer.artifact import ArtifactError, read_manifest

    parsed = parse_model_name(name)
    if parsed is None:
        if name.startswith(MODEL_PREFIX):
            raise NotFoundError(f"model {name!r}: a tenant classifier is named classifier.<tenant>.<version>")
        return None
    if not config.tenant_classifiers:
        raise NotFoundError(f"model {name!r}: this text service serves no tenant classifiers (set tenant_classifiers "
                            f"in its config)")
    folder = Path(config.tenant_classifiers)
    tenant, version = parsed
    for directory in classifier_directories(folder) if folder.is_dir() else []:
        try:
            manifest = read_manifest(directory)
        except ArtifactError as error:
            log.warning("tenant_classifiers: skipping %s: %s", directory, error)
            continue
        if (manifest.get("tenant"), manifest.get("version")) == (tenant, version):
            encoder = getattr(serving.get("text_moderation"), "multilingual_encoder", None)
            if encoder is None:
                raise NotFoundError(f"model {name!r}: text_moderation is not serving, and the classifier reads its encoder")
            return TenantClassifierModel(directory, encoder)
    raise NotFoundError(f"model {name!r}: no classifier of tenant {tenant!r} at version {version} in {folder}")


def main(argv: Sequence[str] | None = None) -> int:
    # Imported here, not at the top: `served_models` is also used without the gRPC server stack (a Triton
    # Inference Server hosting the same models, services/common/serving/pytriton_host.py).
    from services.common.serving.modality_main import run_modality

    return run_modality("text", served_models, argv, loader=load_tenant_classifier)


if __name__ == "__main__":
    raise SystemExit(main())
