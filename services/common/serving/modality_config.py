"""Configuration of one modality service (text, vision, OCR), read from `config/<service>.yaml`.

Environment overrides, read once at start (for containers): `AUDITMESH_LISTEN`, `AUDITMESH_METRICS_LISTEN`,
`AUDITMESH_TLS_*` (see `services.common.service_config`), `AUDITMESH_MODEL_REPOSITORY` (path),
`AUDITMESH_ORT_PROVIDERS` (`onnxruntime.providers`, comma-separated: the CUDA image sets
`CUDAExecutionProvider,CPUExecutionProvider`), `AUDITMESH_BANKS_PATH` (the match service's
`match.banks_path`), `AUDITMESH_BANKS_DSN` (`match.banks_dsn`: its banks in PostgreSQL) and the internal secrets `AUDITMESH_INTERNAL_SECRET[_FILE]`, `AUDITMESH_INTERNAL_ADMIN_SECRET[_FILE]`
(`services.common.internal_auth`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path

import onnxruntime as ort

from services.common.auth_throttle import ThrottleConfig
from services.common.config import ConfigError, load_yaml_file
from services.common.image_decode import ImageLimits
from services.common.placement import Placement
from services.common.internal_auth import InternalAuthConfig, InternalCredentials
from services.common.service_config import ENV_MODEL_REPOSITORY, ServerConfig, server_from_env
from services.match.settings import MatchSettings
from services.common.serving.batcher import BatchingConfig
from services.common.serving.onnx_session import SessionOptions


#: Execution providers for this service's ONNX sessions, comma-separated (overrides `onnxruntime.providers`).
ENV_ORT_PROVIDERS = "AUDITMESH_ORT_PROVIDERS"
#: The match service's bank store (overrides `match.banks_path`).
ENV_BANKS_PATH = "AUDITMESH_BANKS_PATH"
#: The match service's banks in PostgreSQL (overrides `match.banks_dsn`; it may carry a password).
ENV_BANKS_DSN = "AUDITMESH_BANKS_DSN"


@dataclass(frozen=True)
class OrtConfig:
    """ONNX Runtime thread pools and execution providers. Default 1 intra-op thread: four services share
    a 2-core machine. `providers`, in order of preference: a provider this onnxruntime build lacks (CUDA
    in the CPU wheel) is skipped with a warning at session creation, CPU is the last resort."""

    intra_op_threads: int = 1
    inter_op_threads: int = 1
    providers: tuple[str, ...] = ("CPUExecutionProvider",)

    def session_options(self) -> SessionOptions:
        return SessionOptions(intra_op_threads=self.intra_op_threads, inter_op_threads=self.inter_op_threads,
                              providers=self.providers)

    def __post_init__(self) -> None:
        self.session_options()  # validates
        known = set(ort.get_all_providers())
        unknown = [p for p in self.providers if p not in known]
        if not self.providers or unknown:
            raise ValueError(f"providers must name ONNX Runtime execution providers (e.g. CUDAExecutionProvider, "
                             f"CPUExecutionProvider); unknown: {unknown or 'none given'}")


#: Room a ModelInfer message needs besides its tensor contents (names, shapes, parameters).
ENVELOPE_BYTES = 64 * 1024


@dataclass(frozen=True)
class ServingLimits:
    """What one ModelInfer may carry (`limits:` in config/<modality>.yaml); over a limit the call is
    refused with RESOURCE_EXHAUSTED naming it, before any row is queued. Rows are bounded in number and
    size, so every batch the service runs is bounded in work and memory, and no row waits behind an
    unbounded one. The router reads these from the same file at start (services/router/config.py) and
    refuses to start if its own limits do not fit them: one source of truth.

    * `max_request_bytes`: tensor contents of one request (BYTES rows with their 4-byte length prefixes);
    * `max_rows`: rows (the batch dimension) of one request;
    * `max_row_bytes`: one BYTES element (one text, one encoded image);
    * `max_image_side` / `max_image_pixels`: decoding limits of the image services.
    """

    max_request_bytes: int = 8 * 1024 * 1024
    max_rows: int = 64
    max_row_bytes: int = 1024 * 1024
    max_image_side: int = 8192
    max_image_pixels: int = 40_000_000

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if value < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        if self.max_row_bytes > self.max_request_bytes:
            raise ValueError(f"max_row_bytes ({self.max_row_bytes}) must be <= max_request_bytes ({self.max_request_bytes})")

    def image_limits(self) -> ImageLimits:
        """The decoding limits of one image (its bytes are one row)."""
        return ImageLimits(self.max_row_bytes, self.max_image_side, self.max_image_pixels)


@dataclass(frozen=True)
class ModalityServiceConfig:
    """One modality service: where it listens, who may call it, where models are, threads, batching, and
    where its process runs (`placement`: CPUs and niceness, applied by the launcher; services/common/placement.py)."""

    service: str
    server: ServerConfig = field(default_factory=ServerConfig)
    model_repository: str = "model_repository"
    onnxruntime: OrtConfig = field(default_factory=OrtConfig)
    batching: BatchingConfig = field(default_factory=BatchingConfig)
    limits: ServingLimits = field(default_factory=ServingLimits)
    placement: Placement = field(default_factory=Placement)
    #: The shared secrets of the internal port (services/common/internal_auth.py).
    auth: InternalAuthConfig = field(default_factory=InternalAuthConfig)
    #: Failed-authentication throttle (services/common/auth_throttle.py).
    auth_throttle: ThrottleConfig = field(default_factory=ThrottleConfig)
    #: Text service only: a folder of tenant classifier directories (`auditmesh classifier train --out
    #: DIR/<tenant>`); each is served as the model `classifier.<tenant>` (services/text/tenant_classifier.py).
    #: "" = none.
    tenant_classifiers: str = ""
    #: Text service: the memory the loaded tenant classifiers may hold together (their heads and n-gram
    #: vocabularies, a few MB each; the encoder is shared and not counted). Past it the least recently used
    #: are unloaded, and loaded again on their next request (services/common/serving/model_lifecycle.py).
    tenant_classifier_budget_mb: float = 512.0
    #: Match service only: its banks and how it loads them (services/match/settings.py).
    match: MatchSettings = field(default_factory=MatchSettings)

    def __post_init__(self) -> None:
        if self.service not in ("text", "vision", "ocr", "match"):
            raise ValueError(f"service must be text, vision, ocr or match, got {self.service!r}")
        if not self.tenant_classifier_budget_mb > 0:
            raise ValueError(f"tenant_classifier_budget_mb: must be > 0, got {self.tenant_classifier_budget_mb}")
        if self.tenant_classifiers and self.service != "text":
            raise ValueError(f"tenant_classifiers: only the text service serves tenant classifiers, this is "
                             f"{self.service!r}")
        if self.limits.max_request_bytes + ENVELOPE_BYTES > self.server.max_message_bytes:
            raise ValueError(f"limits.max_request_bytes ({self.limits.max_request_bytes}) + {ENVELOPE_BYTES} bytes of "
                             f"message envelope must fit server.max_message_bytes ({self.server.max_message_bytes})")


def load_service_config(path: Path) -> ModalityServiceConfig:
    """Load `path`, then apply the environment overrides."""
    config = load_yaml_file(path, ModalityServiceConfig)
    config = replace(config, server=server_from_env(config.server, os.environ))
    if os.environ.get(ENV_MODEL_REPOSITORY):
        config = replace(config, model_repository=os.environ[ENV_MODEL_REPOSITORY])
    if os.environ.get(ENV_BANKS_PATH, "").strip():
        config = replace(config, match=replace(config.match, banks_path=os.environ[ENV_BANKS_PATH].strip()))
    if os.environ.get(ENV_BANKS_DSN, "").strip():
        config = replace(config, match=replace(config.match, banks_dsn=os.environ[ENV_BANKS_DSN].strip()))
    if os.environ.get(ENV_ORT_PROVIDERS, "").strip():
        providers = tuple(p.strip() for p in os.environ[ENV_ORT_PROVIDERS].split(",") if p.strip())
        try:
            config = replace(config, onnxruntime=replace(config.onnxruntime, providers=providers))
        except ValueError as error:
            raise ConfigError(str(path), f"environment {ENV_ORT_PROVIDERS}", str(error)) from None
    return config


def load_credentials(config: ModalityServiceConfig, source: str) -> InternalCredentials:
    """The secrets this service checks, from the environment or `auth`'s files (ConfigError naming
    `source` when the port would be unauthenticated without `auth.required: false`)."""
    return InternalCredentials.load(config.auth, os.environ, source)
