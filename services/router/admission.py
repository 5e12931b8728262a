"""Per-tenant admission: a token-bucket rate quota (items/s with a burst) and a cap on items in flight.
Pure: time is passed in. A rejection carries how long to wait before retrying (sent to the client as
google.rpc.RetryInfo with RESOURCE_EXHAUSTED).

Example::

    admission = Admission()
    ticket = admission.admit(tenant, items=3, now=time.monotonic())   # or raises OverQuotaError
    ...
    admission.release(ticket)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from services.common.errors import LimitExceededError

#: Retry hint when the in-flight cap (not the rate) is what rejected a request.
IN_FLIGHT_RETRY_S = 0.05


class OverQuotaError(LimitExceededError):
    """The tenant is over its rate quota or in-flight cap. `retry_after_s` says when to retry."""

    def __init__(self, message: str, retry_after_s: float) -> None:
        super().__init__(message)
        self.retry_after_s: float | None = retry_after_s


@dataclass(frozen=True)
class Quota:
    """`items_per_s` 0 = no rate limit; `burst` defaults to one second of rate; `max_in_flight` 0 = no cap.

    With a shared quota backend (services/router/shared_quota.py) `items_per_s` also holds across all
    router replicas, and `on_backend_error` (allow | deny; "" = the router's `shared_quota` default)
    says what this tenant gets while that backend fails. The burst and the in-flight cap stay per replica.
    """

    items_per_s: float = 0.0
    burst: int = 0
    max_in_flight: int = 0
    on_backend_error: str = ""

    def __post_init__(self) -> None:
        if self.items_per_s < 0 or self.burst < 0 or self.max_in_flight < 0:
            raise ValueError("items_per_s, burst and max_in_flight must be >= 0 (0 = unlimited)")
        if self.on_backend_error not in ("", "allow", "deny"):
            raise ValueError(f"on_backend_error must be allow or deny (or absent), got {self.on_backend_error!r}")

    @property
    def capacity(self) -> float:
        return float(self.burst) if self.burst else max(self.items_per_s, 1.0)


@dataclass
class _Bucket:
    tokens: float
    updated: float
    in_flight: int = 0


@dataclass(frozen=True)
class Ticket:
    tenant: str
    items: int


@dataclass
class Admission:
    """Token buckets and in-flight counters for every tenant, created on first use."""

    _buckets: dict[str, _Bucket] = field(default_factory=dict)

    def admit(self, tenant: str, quota: Quota, items: int, now: float) -> Ticket:
        """Admit `items` for `tenant` or raise OverQuotaError (nothing is charged on rejection)."""
        bucket = self._buckets.setdefault(tenant, _Bucket(quota.capacity, now))
        if quota.items_per_s > 0:
            bucket.tokens = min(quota.capacity, bucket.tokens + (now - bucket.updated) * quota.items_per_s)
        bucket.updated = now
        if quota.max_in_flight and bucket.in_flight + items > quota.max_in_flight:
            raise OverQuotaError(f"tenant {tenant!r} has {bucket.in_flight} items in flight; the limit is "
                                 f"{quota.max_in_flight}", IN_FLIGHT_RETRY_S)
        if quota.items_per_s > 0:
            if items > quota.capacity:
                raise OverQuotaError(f"{items} items is over tenant {tenant!r}'s burst of {quota.capacity:g}; "
                                     "send smaller batches", 1.0)
            if bucket.tokens < items:
                wait = (items - bucket.tokens) / quota.items_per_s
                raise OverQuotaError(f"tenant {tenant!r} is over its quota of {quota.items_per_s:g} items/s "
                                     f"(burst {quota.capacity:g}); retry in {wait * 1000:.0f} ms", wait)
            bucket.tokens -= items
        bucket.in_flight += items
        return Ticket(tenant, items)

    def release(self, ticket: Ticket) -> None:
        """The admitted items have been answered (or failed)."""
        bucket = self._buckets.get(ticket.tenant)
        if bucket is not None:
            bucket.in_flight = max(0, bucket.in_flight - ticket.items)

    def in_flight(self, tenant: str) -> int:
        bucket = self._buckets.get(tenant)
        return bucket.in_flight if bucket else 0
