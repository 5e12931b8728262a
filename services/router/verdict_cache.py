"""A bounded, content-addressed verdict cache, partitioned by tenant. Pure: no gRPC, an injected clock.

A moderation decision depends only on the content, the policy version (and canary arm or shadow
candidate) and the model versions, so a verdict can be reused for the same content under the same
versions. The key (`VerdictCache.key`) is a keyed BLAKE2b digest over all of them:

- the *scope*: tenant, policy name and version, canary arm, shadow candidate version, and the model
  versions that scored; any policy activation, rollback, canary change or model swap changes the key,
  so a stale verdict is never found: invalidation by construction, nothing to flush;
- the *content*: each part's kind and bytes (normalised text, or the image's bytes), in order.

Tenants never share anything: each tenant has its own partition (its own LRU and byte budget, so one
tenant's traffic cannot evict another's entries, and a hit or a miss says nothing about other tenants'
content), and its own hash key (derived from a per-process secret and the tenant id), so equal content
has different digests for different tenants.

Bounds: `max_bytes_per_tenant` (an estimate of each entry's memory, given by the caller), least
recently used out first; `ttl_s` from insertion (an entry past it is gone, even if used since);
`max_entry_bytes` (a larger value is not cached). Counters per tenant: hits, misses, evictions by
reason, bytes and entries (`stats()`, read by the router's metrics at scrape time).

Example::

    cache: VerdictCache[str] = VerdictCache(VerdictCacheConfig(enabled=True), clock=lambda: 0.0)
    key = cache.key("acme", ("default", "v3", "", "", "text_moderation=1"), [("text", b"gg")])
    cache.get("acme", key)                # None (a miss)
    cache.put("acme", key, "allow", 200)  # True
    cache.get("acme", key)                # "allow"
"""

from __future__ import annotations

import hashlib
import os
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Callable, Generic, Literal, Mapping, Sequence, TypeVar

__all__ = ["CacheStats", "VerdictCache", "VerdictCacheConfig"]

V = TypeVar("V")
#: Digest size of a key (bytes).
KEY_BYTES = 32
#: Fixed cost counted per entry on top of its value: the key, the OrderedDict slot, the entry tuple.
ENTRY_OVERHEAD_BYTES = 200
EVICTION_REASONS = ("size", "ttl")


@dataclass(frozen=True)
class VerdictCacheConfig:
    """`verdict_cache:` in config/router.yaml (validated on load)."""

    enabled: bool = False
    #: Memory budget of each tenant's partition, in bytes (an estimate of the cached verdicts' size).
    max_bytes_per_tenant: int = 16 * 1024 * 1024
    #: A verdict estimated larger than this is not cached (e.g. one with hundreds of evidence spans).
    max_entry_bytes: int = 64 * 1024
    #: Seconds an entry lives after it was stored.
    ttl_s: float = 300.0
    #: `normalized`: text parts are keyed by their normalised form (services.common.text_match.normalize:
    #: "GG", "gg" and "g g" share an entry), on the same assumption the lexicon makes, that the models
    #: judge the normalised text. `exact`: keyed by the text as sent, for models that read raw text.
    text_key: Literal["normalized", "exact"] = "normalized"

    def __post_init__(self) -> None:
        if self.max_bytes_per_tenant < 1024:
            raise ValueError(f"max_bytes_per_tenant must be >= 1024, got {self.max_bytes_per_tenant}")
        if not 1 <= self.max_entry_bytes <= self.max_bytes_per_tenant:
            raise ValueError(f"max_entry_bytes must be between 1 and max_bytes_per_tenant "
                             f"({self.max_bytes_per_tenant}), got {self.max_entry_bytes}")
        if not self.ttl_s > 0:
            raise ValueError(f"ttl_s must be > 0, got {self.ttl_s}")


@dataclass
class CacheStats:
    """One tenant's counters (monotonic, except `bytes` and `entries`)."""

    hits: int = 0
    misses: int = 0
    evictions: dict[str, int] = field(default_factory=lambda: dict.fromkeys(EVICTION_REASONS, 0))
    bytes: int = 0
    entries: int = 0


@dataclass(frozen=True)
class _Entry(Generic[V]):
    value: V
    size: int
    expires_at: float


class _Partition(Generic[V]):
    """One tenant's LRU: oldest use first."""

    def __init__(self, secret: bytes) -> None:
        self.secret = secret
        self.entries: OrderedDict[bytes, _Entry[V]] = OrderedDict()
        self.stats = CacheStats()

    def remove(self, key: bytes, reason: str) -> None:
        entry = self.entries.pop(key)
        self.stats.bytes -= entry.size
        self.stats.entries -= 1
        self.stats.evictions[reason] += 1


class VerdictCache(Generic[V]):
    """See the module docstring. Not thread-safe: one event loop owns it."""

    def __init__(self, config: VerdictCacheConfig, *, clock: Callable[[], float], secret: bytes | None = None) -> None:
        self.config = config
        self._clock = clock
        self._secret = secret if secret is not None else os.urandom(32)
        self._partitions: dict[str, _Partition[V]] = {}

    def _partition(self, tenant: str) -> _Partition[V]:
        partition = self._partitions.get(tenant)
        if partition is None:
            secret = hashlib.blake2b(tenant.encode("utf-8"), key=self._secret, digest_size=32).digest()
            partition = self._partitions[tenant] = _Partition(secret)
        return partition

    def key(self, tenant: str, scope: Sequence[str], parts: Sequence[tuple[str, bytes]]) -> bytes:
        """The digest for `parts` ((kind, content bytes) in order) under `scope` (the policy, arm and
        model versions, as strings), keyed with `tenant`'s own secret. Every field is length-prefixed, so
        no two different inputs share a byte stream."""
        digest = hashlib.blake2b(key=self._partition(tenant).secret, digest_size=KEY_BYTES)
        for text in scope:
            _feed(digest, text.encode("utf-8"))
        digest.update(b"|parts")
        for kind, content in parts:
            _feed(digest, kind.encode("utf-8"))
            _feed(digest, content)
        return digest.digest()

    def get(self, tenant: str, key: bytes) -> V | None:
        """The value stored for `key` in `tenant`'s partition (counted as a hit), else None (a miss)."""
        partition = self._partition(tenant)
        entry = partition.entries.get(key)
        if entry is not None and entry.expires_at <= self._clock():
            partition.remove(key, "ttl")
            entry = None
        if entry is None:
            partition.stats.misses += 1
            return None
        partition.entries.move_to_end(key)
        partition.stats.hits += 1
        return entry.value

    def put(self, tenant: str, key: bytes, value: V, size: int) -> bool:
        """Store `value` (about `size` bytes) for `key`; evicts `tenant`'s expired, then least recently
        used, entries to stay within its budget. False (nothing stored) if it is over `max_entry_bytes`."""
        size += ENTRY_OVERHEAD_BYTES
        if size > self.config.max_entry_bytes:
            return False
        partition = self._partition(tenant)
        now = self._clock()
        if key in partition.entries:
            old = partition.entries.pop(key)
            partition.stats.bytes -= old.size
            partition.stats.entries -= 1
        self._drop_expired(partition, now)
        while partition.entries and partition.stats.bytes + size > self.config.max_bytes_per_tenant:
            partition.remove(next(iter(partition.entries)), "size")
        partition.entries[key] = _Entry(value, size, now + self.config.ttl_s)
        partition.stats.bytes += size
        partition.stats.entries += 1
        return True

    def _drop_expired(self, partition: _Partition[V], now: float) -> None:
        """Expired entries among the least recently used ones (amortised: stops at the first live one)."""
        while partition.entries:
            key, entry = next(iter(partition.entries.items()))
            if entry.expires_at > now:
                return
            partition.remove(key, "ttl")

    def retain(self, tenants: Sequence[str]) -> None:
        """Drop the partitions of tenants not in `tenants` (removed from the tenants file)."""
        keep = set(tenants)
        for tenant in [t for t in self._partitions if t not in keep]:
            del self._partitions[tenant]

    def stats(self) -> Mapping[str, CacheStats]:
        """Each tenant's counters (tenant id -> CacheStats); read, do not modify."""
        return {tenant: partition.stats for tenant, partition in self._partitions.items()}


def _feed(digest: "hashlib.blake2b", data: bytes) -> None:
    digest.update(len(data).to_bytes(8, "little"))
    digest.update(data)
