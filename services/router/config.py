"""Router configuration (`config/router.yaml`), validated on load.

Environment overrides, read once at start (containers): `AUDITMESH_LISTEN`, `AUDITMESH_METRICS_LISTEN`,
`AUDITMESH_TEXT_URL`, `AUDITMESH_VISION_URL`, `AUDITMESH_OCR_URL`, `AUDITMESH_TENANTS_FILE`,
`AUDITMESH_POLICIES_DIR`, `AUDITMESH_POLICY_STORE`, `AUDITMESH_AUDIT_LOG`, `AUDITMESH_ADMIN_KEYS_FILE`,
`AUDITMESH_LANE` (the `--lane`), `AUDITMESH_ADMIN_LISTEN` (`off` = no admin port in this process),
`AUDITMESH_ALLOW_DEMO_KEYS` (`1`/`true`), `AUDITMESH_REDIS_URL` (`redis.url`), `AUDITMESH_POSTGRES_DSN`
(`lifecycle.postgres_dsn`), `AUDITMESH_TLS_*` (the public port's TLS) and
`AUDITMESH_UPSTREAM_TLS_*` / `AUDITMESH_INTERNAL_SECRET[_FILE]` (what the router presents upstream).

Security (docs/security.md): the PolicyAdmin API is served only on `admin_listen`, its own port, so
the public port neither serves nor lists it; with lanes only the first lane's process serves it (the
lanes share one policy store). `internal` is the shared secret and TLS of the router's channels to
the modality services. Demo keys (config/tenants.yaml, the demo admin key) make the router refuse to
start on a non-loopback address unless `allow_demo_keys` (services/router/demo_keys.py).

With `lanes:` (services/router/lanes.py) each router process serves one lane: the lane's `listen`
and `metrics_listen` replace `server.listen` and `server.metrics_listen` (and AUDITMESH_LISTEN /
AUDITMESH_METRICS_LISTEN still override those, for the process they are set for).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal, Mapping

from services.common.contracts.match import MAX_HEADER_BYTES
from services.common.auth_throttle import ThrottleConfig
from services.common.config import ConfigError, load_yaml_file
from services.common.image_decode import ImageLimits
from services.common.placement import Placement
from services.common.service_config import ServerConfig, server_from_env
from services.common.serving.modality_config import ModalityServiceConfig, ServingLimits
from services.common.tls_config import ClientTlsConfig, client_tls_from_env
from services.router.control.admin_auth import AdminKey
from services.router.control.canary import RollbackBounds
from services.router.lanes import Lane, pick_lane, validate_lanes
from services.router.scheduler import SchedulingConfig
from services.common.serving.modality_config import ENV_BANKS_PATH  # lifecycle.banks_path, as match.banks_path
from services.router.redis_state import RedisConfig
from services.router.shared_quota import SharedQuotaConfig
from services.router.verdict_cache import VerdictCacheConfig

MODALITIES = ("text", "vision", "ocr")
#: Upstreams a router may have besides those: `match` (known-content matching, docs/matching.md).
OPTIONAL_UPSTREAMS = ("match",)
#: What the match service's envelope adds to an item: its header line and newline.
MATCH_HEADER_BYTES = MAX_HEADER_BYTES + 1
ENV_UPSTREAM_URL = {m: f"AUDITMESH_{m.upper()}_URL" for m in (*MODALITIES, *OPTIONAL_UPSTREAMS)}
ENV_TENANTS_FILE = "AUDITMESH_TENANTS_FILE"
ENV_POLICIES_DIR = "AUDITMESH_POLICIES_DIR"
ENV_POLICY_STORE = "AUDITMESH_POLICY_STORE"
ENV_AUDIT_LOG = "AUDITMESH_AUDIT_LOG"
ENV_ADMIN_KEYS_FILE = "AUDITMESH_ADMIN_KEYS_FILE"
ENV_LANE = "AUDITMESH_LANE"
ENV_ADMIN_LISTEN = "AUDITMESH_ADMIN_LISTEN"
ENV_ALLOW_DEMO_KEYS = "AUDITMESH_ALLOW_DEMO_KEYS"
#: The Redis shared by router replicas (`redis.url`); may carry a password, so it is best set from a secret.
ENV_REDIS_URL = "AUDITMESH_REDIS_URL"
#: The policy store's and audit log's PostgreSQL (`lifecycle.postgres_dsn`); best set from a secret.
ENV_POSTGRES_DSN = "AUDITMESH_POSTGRES_DSN"
#: Where review tasks are queued (overrides `lifecycle.review_tasks_backend`).
ENV_REVIEW_TASKS_BACKEND = "AUDITMESH_REVIEW_TASKS_BACKEND"


@dataclass(frozen=True)
class Upstream:
    """A modality service (ours or a Triton server) and the model to call on it.

    The text upstream serves two models: `model` (profile fast, and balanced's first pass; normally
    `text_moderation`) and `semantic_model` (profile accurate, and balanced's second opinion; normally
    `text_semantic`; "" = the text contract's name). Each gets its own queue and batches.
    """

    url: str
    model: str
    model_version: str = ""
    semantic_model: str = ""
    scheduling: SchedulingConfig = field(default_factory=SchedulingConfig)
    #: The modality service's own config file, whose `limits` section says what one ModelInfer may
    #: carry (the one source of truth; "" = `<modality>.yaml` beside the router's file). Read at start.
    service_config: str = ""
    #: Only for an upstream without such a file (a Triton server): its limits, stated here instead.
    limits: ServingLimits | None = None

    def __post_init__(self) -> None:
        host, sep, port = self.url.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ValueError(f"url must be host:port, got {self.url!r}")


@dataclass(frozen=True)
class Deadlines:
    """Used when the client sets no deadline (default) and to cap the ones it sets (max)."""

    default_ms: int = 2000
    max_ms: int = 30000

    def __post_init__(self) -> None:
        if not 1 <= self.default_ms <= self.max_ms:
            raise ValueError(f"need 1 <= default_ms <= max_ms, got {self.default_ms} and {self.max_ms}")


@dataclass(frozen=True)
class RequestLimits:
    """Per-request size limits; over a limit → RESOURCE_EXHAUSTED with the limit in the message."""

    max_text_chars: int = 20000
    max_parts_per_item: int = 16
    max_batch_items: int = 128
    max_item_id_chars: int = 128
    max_image_bytes: int = 10 * 1024 * 1024
    max_image_side: int = 8192
    max_image_pixels: int = 40_000_000
    #: Animated images (GIF, animated WebP, APNG; services/router/frames.py): at most this many frames, and
    #: this many pixels over all frames (frames x width x height), else refused as a frame bomb; each is judged
    #: on at most `frames_sampled` of its frames (the first, those on screen at evenly spaced moments, the most
    #: different).
    max_animation_frames: int = 1000
    max_animation_pixels: int = 40_000_000
    frames_sampled: int = 8
    #: Frames one item's animations send on in all (each animation gets its share, at least 1, at most
    #: `frames_sampled`): an item of many animations costs the image services at most this many images.
    max_frames_per_item: int = 32
    #: Item.metadata (stored in the audit log with each decision): entries, and characters per key and value.
    max_metadata_entries: int = 32
    max_metadata_key_chars: int = 64
    max_metadata_value_chars: int = 1024

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if value < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")

    def image_limits(self) -> ImageLimits:
        return ImageLimits(self.max_image_bytes, self.max_image_side, self.max_image_pixels)


#: `lifecycle.review_tasks_backend` values ("" = PostgreSQL with a DSN, else SQLite).
REVIEW_TASKS_BACKENDS = ("", "sqlite", "postgres", "redis")


@dataclass(frozen=True)
class LifecycleConfig:
    """Policy store, config watching, canary defaults, the audit log and admin keys (docs/policy-lifecycle.md)."""

    store_path: str = "var/policy_store.sqlite"
    watch_interval_s: float = 1.0
    audit_path: str = "var/audit.sqlite"
    audit_retention_days: float = 30.0
    audit_flush_interval_s: float = 0.2
    #: "zlib": records stored compressed (docs/policy-lifecycle.md "Audit log size"); "none": compact JSON text.
    audit_compression: Literal["none", "zlib"] = "none"
    admin_keys: tuple[AdminKey, ...] = ()
    admin_keys_file: str = ""
    canary_bounds: RollbackBounds = field(default_factory=RollbackBounds)
    #: Reviewers' labels per tenant (SubmitLabels, services/router/control/label_store.py); "" = `labels.sqlite`
    #: beside the policy store.
    labels_path: str = ""
    #: Review tasks (StreamReviewTasks, services/router/control/review_queue.py); "" = `review_tasks.sqlite`
    #: beside the policy store.
    review_tasks_path: str = ""
    #: How often buffered review tasks are written (a crash can lose at most this interval's tasks).
    review_flush_interval_s: float = 0.05
    #: Where review tasks are queued: "" = PostgreSQL with `postgres_dsn`, else the SQLite file above;
    #: "sqlite", "postgres" (needs `postgres_dsn`), or "redis": Redis Streams on `redis.url`, shared by every
    #: replica on that Redis (services/router/control/reviews_redis.py; Redis 6.2+, its persistence is the
    #: queue's: configure AOF or RDB). A backend the settings cannot give stops the router, naming this key.
    review_tasks_backend: str = ""
    #: The bank store the BankAdmin API writes (services/match/banks.py): the same store the match services read.
    #: A file path (the match service's `match.banks_path`); "" = `banks.sqlite` beside the policy store
    #: (var/banks.sqlite, the match service's default), or with `postgres_dsn`, that database
    #: (services/match/banks_postgres.py; the match services read it with `match.banks_dsn`); "off" = BankAdmin
    #: not served. Env AUDITMESH_BANKS_PATH.
    banks_path: str = ""
    #: PostgreSQL shared by every router replica for the policy store and the audit log
    #: (services/router/control/store_postgres.py, audit_postgres.py); "" = the SQLite files above.
    #: Env AUDITMESH_POSTGRES_DSN (it may carry a password: set it from a secret; never in a repr).
    postgres_dsn: str = field(default="", repr=False)

    @property
    def labels_file(self) -> str:
        """Where the label store is: `labels_path`, else beside the policy store."""
        return self.labels_path or str(Path(self.store_path).parent / "labels.sqlite")

    @property
    def banks_in_postgres(self) -> bool:
        """Whether BankAdmin's banks are in PostgreSQL (`postgres_dsn` set, no `banks_path` named)."""
        return bool(self.postgres_dsn) and not self.banks_path

    @property
    def banks_file(self) -> str | None:
        """Where the bank store is: `banks_path`, else beside the policy store; None when BankAdmin is off."""
        if self.banks_path == "off" or self.banks_in_postgres:
            return None
        return self.banks_path or str(Path(self.store_path).parent / "banks.sqlite")

    @property
    def review_tasks_file(self) -> str:
        """Where the review-task queue is: `review_tasks_path`, else beside the policy store."""
        return self.review_tasks_path or str(Path(self.store_path).parent / "review_tasks.sqlite")

    def __post_init__(self) -> None:
        if self.review_tasks_backend not in REVIEW_TASKS_BACKENDS:
            raise ValueError(f"review_tasks_backend must be one of {REVIEW_TASKS_BACKENDS}, got {self.review_tasks_backend!r}")
        if self.postgres_dsn and not self.postgres_dsn.startswith(("postgresql://", "postgres://")):
            raise ValueError("postgres_dsn must be a postgresql:// URL (or empty: the SQLite files)")
        for name in ("watch_interval_s", "audit_retention_days", "audit_flush_interval_s", "review_flush_interval_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")


@dataclass(frozen=True)
class InternalClientConfig:
    """What the router presents to the modality services: the shared secret's file (or env
    AUDITMESH_INTERNAL_SECRET[_FILE]) and, for TLS / mTLS, the CA and its client certificate."""

    secret_file: str = ""
    tls: ClientTlsConfig | None = None


def _check_listen(value: str, name: str) -> None:
    host, sep, port = value.rpartition(":")
    if value and (not sep or not host or not port.isdigit()):
        raise ValueError(f"{name} must be host:port or empty, got {value!r}")


@dataclass(frozen=True)
class RouterConfig:
    upstreams: Mapping[str, Upstream]
    server: ServerConfig = field(default_factory=lambda: ServerConfig("127.0.0.1:8100", max_message_bytes=64 * 1024 * 1024))
    tenants_file: str = "config/tenants.yaml"
    policies_dir: str = "config/policies"
    deadlines: Deadlines = field(default_factory=Deadlines)
    limits: RequestLimits = field(default_factory=RequestLimits)
    lifecycle: LifecycleConfig = field(default_factory=LifecycleConfig)
    #: Reuse of verdicts for repeated content (services/router/verdict_cache.py); off by default.
    verdict_cache: VerdictCacheConfig = field(default_factory=VerdictCacheConfig)
    #: The Redis shared by router replicas (quotas, canary counts); off while `url` is "".
    redis: RedisConfig = field(default_factory=RedisConfig)
    #: Tenants' rate quotas counted across all router replicas in that Redis (services/router/shared_quota.py).
    shared_quota: SharedQuotaConfig = field(default_factory=SharedQuotaConfig)
    #: Ingress lanes (services/router/lanes.py); () = one process serving every class.
    lanes: tuple[Lane, ...] = ()
    #: The lane this process serves (set by `load_router_config` from --lane); None without lanes.
    lane: Lane | None = None
    #: Where every router process runs (CPUs, niceness; services/common/placement.py), applied by the
    #: launcher; a lane's own `nice` is added by the router itself at start.
    placement: Placement = field(default_factory=Placement)
    #: host:port of the PolicyAdmin API ("" = not served by this process). Never the public port.
    admin_listen: str = ""
    #: The router's side of the internal ports' authentication (secret, TLS).
    internal: InternalClientConfig = field(default_factory=InternalClientConfig)
    #: Failed-authentication throttle of the public and the admin port (services/common/auth_throttle.py).
    auth_throttle: ThrottleConfig = field(default_factory=ThrottleConfig)
    #: Let the shipped demo keys work on a non-loopback address (demo containers only).
    allow_demo_keys: bool = False

    def __post_init__(self) -> None:
        _check_listen(self.admin_listen, "admin_listen")
        if self.admin_listen and self.admin_listen == self.server.listen and not self.admin_listen.endswith(":0"):
            raise ValueError("admin_listen must be a port of its own, not server.listen (the public port)")
        validate_lanes(self.lanes)
        if self.lane is not None and self.lane not in self.lanes:
            raise ValueError("lane: the lane is chosen with --lane (or AUDITMESH_LANE), not set in the file")
        missing = [m for m in MODALITIES if m not in self.upstreams]
        extra = [m for m in self.upstreams if m not in MODALITIES and m not in OPTIONAL_UPSTREAMS]
        if missing or extra:
            raise ValueError(f"upstreams must have {list(MODALITIES)} (and may have {list(OPTIONAL_UPSTREAMS)}); "
                             f"missing {missing}, unknown {extra}")
        for modality, upstream in self.upstreams.items():
            if upstream.semantic_model and modality != "text":
                raise ValueError(f"upstreams.{modality}.semantic_model: only the text upstream has a semantic model")


def load_router_config(path: Path, lane: str | None = None) -> RouterConfig:
    """Load `path`, select the lane (`lane`, else AUDITMESH_LANE, else the first one), apply the
    environment overrides, then read each upstream's limits from its service's config file and check
    that the router's own limits fit them (`upstream_limits`). ConfigError for an unknown lane or
    limits that do not agree, naming the file and the key."""
    return with_upstream_limits(_load(path, lane), path)


def _load(path: Path, lane: str | None) -> RouterConfig:
    config = load_yaml_file(path, RouterConfig)
    env = os.environ
    try:
        chosen = pick_lane(config.lanes, lane or env.get(ENV_LANE) or None)
    except ValueError as error:
        raise ConfigError(str(path), "lanes", str(error)) from None
    if chosen is not None:
        # The first lane's process serves the admin API (the lanes share one store); the others do not.
        admin = config.admin_listen if chosen is config.lanes[0] else ""
        config = replace(config, lane=chosen, admin_listen=admin, server=replace(
            config.server, listen=chosen.listen, metrics_listen=chosen.metrics_listen,
            max_concurrent_rpcs=chosen.max_concurrent_rpcs or config.server.max_concurrent_rpcs,
            max_pending_calls=chosen.max_pending_calls or config.server.max_pending_calls))
    config = replace(config, server=server_from_env(config.server, env))
    upstreams = {m: replace(u, url=env[ENV_UPSTREAM_URL[m]]) if env.get(ENV_UPSTREAM_URL[m]) else u
                 for m, u in config.upstreams.items()}
    lifecycle = config.lifecycle
    admin_listen = env.get(ENV_ADMIN_LISTEN, "").strip()
    try:
        lifecycle = replace(lifecycle, store_path=env.get(ENV_POLICY_STORE) or lifecycle.store_path,
                            audit_path=env.get(ENV_AUDIT_LOG) or lifecycle.audit_path,
                            admin_keys_file=env.get(ENV_ADMIN_KEYS_FILE) or lifecycle.admin_keys_file,
                            banks_path=env.get(ENV_BANKS_PATH, "").strip() or lifecycle.banks_path,
                            postgres_dsn=env.get(ENV_POSTGRES_DSN, "").strip() or lifecycle.postgres_dsn,
                            review_tasks_backend=env.get(ENV_REVIEW_TASKS_BACKEND, "").strip() or lifecycle.review_tasks_backend)
        internal = replace(config.internal, tls=client_tls_from_env(config.internal.tls, env),
                           secret_file=config.internal.secret_file)
        redis = replace(config.redis, url=env[ENV_REDIS_URL].strip()) if env.get(ENV_REDIS_URL, "").strip() else config.redis
        return replace(config, upstreams=upstreams, tenants_file=env.get(ENV_TENANTS_FILE) or config.tenants_file,
                       policies_dir=env.get(ENV_POLICIES_DIR) or config.policies_dir, lifecycle=lifecycle,
                       admin_listen=("" if admin_listen.lower() == "off" else admin_listen) if admin_listen else config.admin_listen,
                       internal=internal, redis=redis,
                       allow_demo_keys=config.allow_demo_keys or env.get(ENV_ALLOW_DEMO_KEYS, "").lower() in ("1", "true", "yes"))
    except ValueError as error:  # an override that does not validate (e.g. admin port = public port)
        raise ConfigError(str(path), "environment", str(error)) from None


def _service_limits(modality: str, upstream: Upstream, router_file: Path) -> tuple[ServingLimits, str]:
    """An upstream's limits and the file they come from (see `Upstream.service_config`)."""
    where = f"upstreams.{modality}"
    configured = Path(upstream.service_config) if upstream.service_config else router_file.parent / f"{modality}.yaml"
    if upstream.service_config and not configured.is_absolute() and not configured.exists():
        configured = router_file.parent / configured  # relative to the router's file, like `<modality>.yaml`
    if configured.exists():
        if upstream.limits is not None:
            raise ConfigError(str(router_file), f"{where}.limits",
                              f"the {modality} service's limits are in {configured}; state them in one place only")
        return load_yaml_file(configured, ModalityServiceConfig).limits, str(configured)
    if upstream.limits is not None:
        return upstream.limits, f"{router_file} ({where}.limits)"
    if upstream.service_config:
        raise ConfigError(str(router_file), f"{where}.service_config", f"{configured} does not exist")
    return ServingLimits(), f"{configured} (absent: the service's defaults)"


def with_upstream_limits(config: RouterConfig, router_file: Path) -> RouterConfig:
    """`config` with every upstream's `limits` resolved, after checking that what the router accepts
    fits what each service takes: one item (an image of `limits.max_image_bytes`, a text of
    `limits.max_text_chars` in UTF-8) within `max_row_bytes`, images within the service's decoding
    limits, and `scheduling.max_batch_size` rows within `max_rows`. The router also cuts every batch
    to the service's `max_request_bytes` (services/router/dispatch.py)."""
    limits = config.limits
    resolved = {}
    for modality, upstream in config.upstreams.items():
        service, source = _service_limits(modality, upstream, router_file)
        if modality == "text":
            need, what = 4 * limits.max_text_chars, f"a text of limits.max_text_chars = {limits.max_text_chars} characters (up to 4 UTF-8 bytes each)"
        elif modality == "match":  # texts and images, each in an envelope with a short header
            need = max(4 * limits.max_text_chars, limits.max_image_bytes) + MATCH_HEADER_BYTES
            what = f"a text of {limits.max_text_chars} characters or an image of {limits.max_image_bytes} bytes, with its header"
        else:
            need, what = limits.max_image_bytes, f"an image of limits.max_image_bytes = {limits.max_image_bytes} bytes"
        if need > service.max_row_bytes:
            raise ConfigError(source, "limits.max_row_bytes",
                              f"{service.max_row_bytes} bytes cannot hold {what}, which {router_file} accepts: raise "
                              "it, or lower the router's limit")
        if modality != "text" and (limits.max_image_side > service.max_image_side
                                   or limits.max_image_pixels > service.max_image_pixels):
            raise ConfigError(source, "limits.max_image_side",
                              f"the {modality} service decodes images up to {service.max_image_side} px a side and "
                              f"{service.max_image_pixels} pixels, less than {router_file} accepts "
                              f"(limits.max_image_side {limits.max_image_side}, max_image_pixels {limits.max_image_pixels})")
        if upstream.scheduling.max_batch_size > service.max_rows:
            raise ConfigError(str(router_file), f"upstreams.{modality}.scheduling.max_batch_size",
                              f"{upstream.scheduling.max_batch_size} rows per batch is over the {service.max_rows} "
                              f"the {modality} service takes (limits.max_rows in {source})")
        resolved[modality] = replace(upstream, limits=service)
    return replace(config, upstreams=resolved)
