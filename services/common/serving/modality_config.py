"""Configuration of one modality service (text, vision, OCR), read from `config/<service>.yaml`.

Environment overrides, read once at start (for containers): `AUDITMESH_LISTEN`, `AUDITMESH_METRICS_LISTEN`,
`AUDITMESH_TLS_*` (see `services.common.service_config`), `AUDITMESH_MODEL_REPOSITORY` (path) and the
internal secrets `AUDITMESH_INTERNAL_SECRET[_FILE]`, `AUDITMESH_INTERNAL_ADMIN_SECRET[_FILE]`
(`services.common.internal_auth`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path

from services.common.auth_throttle import ThrottleConfig
from services.common.config import load_yaml_file
from services.common.placement import Placement
from services.common.internal_auth import InternalAuthConfig, InternalCredentials
from services.common.service_config import ENV_MODEL_REPOSITORY, ServerConfig, server_from_env
from services.common.serving.batcher import BatchingConfig
from services.common.serving.onnx_session import SessionOptions


@dataclass(frozen=True)
class OrtConfig:
    """ONNX Runtime thread pools. Default 1 intra-op thread: four services share a 2-core machine."""

    intra_op_threads: int = 1
    inter_op_threads: int = 1

    def session_options(self) -> SessionOptions:
        return SessionOptions(intra_op_threads=self.intra_op_threads, inter_op_threads=self.inter_op_threads)

    def __post_init__(self) -> None:
        self.session_options()  # validates


@dataclass(frozen=True)
class ModalityServiceConfig:
    """One modality service: where it listens, who may call it, where models are, threads, batching, and
    where its process runs (`placement`: CPUs and niceness, applied by the launcher; services/common/placement.py)."""

    service: str
    server: ServerConfig = field(default_factory=ServerConfig)
    model_repository: str = "model_repository"
    onnxruntime: OrtConfig = field(default_factory=OrtConfig)
    batching: BatchingConfig = field(default_factory=BatchingConfig)
    placement: Placement = field(default_factory=Placement)
    #: The shared secrets of the internal port (services/common/internal_auth.py).
    auth: InternalAuthConfig = field(default_factory=InternalAuthConfig)
    #: Failed-authentication throttle (services/common/auth_throttle.py).
    auth_throttle: ThrottleConfig = field(default_factory=ThrottleConfig)

    def __post_init__(self) -> None:
        if self.service not in ("text", "vision", "ocr"):
            raise ValueError(f"service must be text, vision or ocr, got {self.service!r}")


def load_service_config(path: Path) -> ModalityServiceConfig:
    """Load `path`, then apply the environment overrides."""
    config = load_yaml_file(path, ModalityServiceConfig)
    config = replace(config, server=server_from_env(config.server, os.environ))
    if os.environ.get(ENV_MODEL_REPOSITORY):
        config = replace(config, model_repository=os.environ[ENV_MODEL_REPOSITORY])
    return config


def load_credentials(config: ModalityServiceConfig, source: str) -> InternalCredentials:
    """The secrets this service checks, from the environment or `auth`'s files (ConfigError naming
    `source` when the port would be unauthenticated without `auth.required: false`)."""
    return InternalCredentials.load(config.auth, os.environ, source)
