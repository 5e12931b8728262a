"""Tenants and API-key authentication. Keys are stored only as SHA-256 hex digests.

`config/tenants.yaml`::

    qos_classes:                        # optional; default realtime / standard / bulk
      - {name: realtime, dscp: 46, link_share_percent: 60}
    tenants:
      - id: acme
        name: Acme Chat
        api_key_sha256: 5e884898da...   # printf %s "$KEY" | sha256sum
        policies: [default, strict]     # allowed policies; the first is the default
        qos_class: realtime             # scheduling class (and DSCP) of its traffic
        weight: 1.0                     # fair share against other tenants of the same class
        quota: {items_per_s: 200, burst: 400, max_in_flight: 256}   # 0 = unlimited
        deadlines: {default_ms: 500, max_ms: 2000}                 # 0 = the router's
        degrade: [ocr, vision]          # stages the router may skip for it under overload, in order

Generate a key and its digest with `auditmesh hash-key`.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass, field
from typing import Mapping

from services.common.config import ConfigError
from services.common.errors import PermissionDeniedError, UnauthenticatedError
from services.common.qos import DEFAULT_CLASSES, QosClass, priority_of, validate_classes
from services.router.admission import Quota
from services.router.control.review_queue import ReviewSampling


#: The longest redress text a tenant may give its statements of reasons.
MAX_REDRESS_CHARS = 2000


@dataclass(frozen=True)
class TenantDeadlines:
    """Override the router's deadlines for this tenant (0 = use the router's)."""

    default_ms: int = 0
    max_ms: int = 0

    def __post_init__(self) -> None:
        if self.default_ms < 0 or self.max_ms < 0:
            raise ValueError("default_ms and max_ms must be >= 0 (0 = the router's)")
        if self.default_ms and self.max_ms and self.default_ms > self.max_ms:
            raise ValueError(f"default_ms ({self.default_ms}) must not exceed max_ms ({self.max_ms})")


#: Stages a tenant may allow the router to skip under overload (its degradation ladder, in order).
#: `text_semantic`: under overload, balanced asks no second opinion and accurate uses the fast model;
#: `classifier`: the tenant's own classifier is not asked (the shipped models answer); `match`: known content
#: is not matched (the models judge it afresh).
SKIPPABLE_STAGES = ("ocr", "vision", "text_semantic", "classifier", "match")


@dataclass(frozen=True)
class Tenant:
    id: str
    api_key_sha256: str
    policies: tuple[str, ...]
    name: str = ""
    qos_class: str = "standard"
    weight: float = 1.0
    quota: Quota = field(default_factory=Quota)
    deadlines: TenantDeadlines = field(default_factory=TenantDeadlines)
    degrade: tuple[str, ...] = ()
    #: Which decisions become review tasks (services/router/control/review_queue.py).
    review_tasks: ReviewSampling = field(default_factory=ReviewSampling)
    #: Where the tenant's users can contest a decision, as its statements of reasons say it (at most
    #: `MAX_REDRESS_CHARS`; "" = services/router/control/reasons.py DEFAULT_REDRESS).
    redress: str = ""

    def __post_init__(self) -> None:
        if not self.id or not self.id.replace("-", "").replace("_", "").isalnum():
            raise ValueError(f"id must be letters, digits, '-' and '_', got {self.id!r}")
        digest = self.api_key_sha256.lower()
        if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
            raise ValueError("api_key_sha256 must be a 64-character hex SHA-256 digest of the key")
        if not self.policies:
            raise ValueError("policies must list at least one policy (the first is the default)")
        if self.weight <= 0:
            raise ValueError(f"weight must be > 0, got {self.weight}")
        unknown = [stage for stage in self.degrade if stage not in SKIPPABLE_STAGES]
        if unknown:
            raise ValueError(f"degrade: {unknown[0]!r} cannot be skipped; choose from {list(SKIPPABLE_STAGES)}")
        if len(self.redress) > MAX_REDRESS_CHARS or not self.redress.replace("\n", " ").isprintable():
            raise ValueError(f"redress: at most {MAX_REDRESS_CHARS} printable characters (line breaks allowed), "
                             f"got {len(self.redress)}")

    def resolve_policy(self, requested: str) -> str:
        """The policy name to use for a request; raises PermissionDeniedError for a policy not allowed."""
        if not requested:
            return self.policies[0]
        if requested not in self.policies:
            raise PermissionDeniedError(f"policy {requested!r} is not enabled for this tenant; allowed: {', '.join(self.policies)}")
        return requested


@dataclass(frozen=True)
class TenantsFile:
    tenants: tuple[Tenant, ...]
    qos_classes: tuple[QosClass, ...] = DEFAULT_CLASSES
    #: Version id in the policy store (services/router/control/store.py); "" = derived from the content hash.
    version: str = ""

    def __post_init__(self) -> None:
        validate_classes(self.qos_classes)


def hash_key(api_key: str) -> str:
    """SHA-256 hex digest of an API key (what tenants.yaml stores)."""
    return hashlib.sha256(api_key.encode("utf-8")).hexdigest()


class TenantDirectory:
    """Looks tenants up by API key. Immutable after construction."""

    def __init__(self, tenants: Mapping[str, Tenant], qos_classes: tuple[QosClass, ...] = DEFAULT_CLASSES) -> None:
        self._by_digest = {tenant.api_key_sha256.lower(): tenant for tenant in tenants.values()}
        self.tenants = dict(tenants)
        self.qos_classes = qos_classes

    def priority(self, tenant: Tenant) -> int:
        """The tenant's class position (0 = highest priority)."""
        return priority_of(self.qos_classes, tenant.qos_class)

    def authenticate(self, api_key: str | None) -> Tenant:
        """The tenant owning `api_key`, or UnauthenticatedError."""
        if not api_key:
            raise UnauthenticatedError("missing API key: send it in the 'x-api-key' metadata header (or 'authorization: Bearer <key>')")
        digest = hash_key(api_key)
        tenant = self._by_digest.get(digest)
        # The dict lookup is on a hash of the key, so its timing reveals nothing useful about the key;
        # compare_digest keeps the final check constant-time anyway.
        if tenant is None or not hmac.compare_digest(tenant.api_key_sha256.lower(), digest):
            raise UnauthenticatedError("unknown API key")
        return tenant


def build_directory(parsed: TenantsFile, source: str, known_policies: set[str] | None) -> TenantDirectory:
    """Check what a single tenant cannot (unique ids and keys, known QoS classes and, unless
    `known_policies` is None, known policies) and index the tenants; errors name `source` and the key."""
    tenants: dict[str, Tenant] = {}
    seen_keys: dict[str, str] = {}
    for index, tenant in enumerate(parsed.tenants):
        key = f"tenants[{index}]"
        if tenant.id in tenants:
            raise ConfigError(source, f"{key}.id", f"duplicate tenant id {tenant.id!r}")
        digest = tenant.api_key_sha256.lower()
        if digest in seen_keys:
            raise ConfigError(source, f"{key}.api_key_sha256", f"same key as tenant {seen_keys[digest]!r}")
        if tenant.qos_class not in {c.name for c in parsed.qos_classes}:
            raise ConfigError(source, f"{key}.qos_class", f"unknown QoS class {tenant.qos_class!r}; "
                                                          f"known: {[c.name for c in parsed.qos_classes]}")
        missing = [p for p in tenant.policies if p not in known_policies] if known_policies is not None else []
        if missing and known_policies is not None:
            raise ConfigError(source, f"{key}.policies", f"unknown policy {missing[0]!r}; known: {sorted(known_policies)}")
        tenants[tenant.id] = tenant
        seen_keys[digest] = tenant.id
    return TenantDirectory(tenants, parsed.qos_classes)
