"""A tenant's rate quota shared by every router replica: fixed windows counted in one backend (Redis),
taken by each replica in leases so that the backend is asked once per lease, not once per item.

Semantics (those of envoyproxy/ratelimit, with one change that makes the bound exact):

- Each tenant has one counter per window of `window_s` seconds, in the backend, keyed by tenant and
  window and expiring (with jitter) after its window. The window is taken from the backend's clock,
  so replicas with skewed clocks still count into the same window.
- The window's limit is the tenant's `items_per_s × window_s` (at least 1).
- A replica that has no tokens left for the current window asks the backend for a *lease* of
  `max(items needed, lease_items)` tokens; `lease_items` is `lease_fraction` of the limit (at least 1).
  The backend grants atomically at most what is left of the window's limit (a partial or zero grant
  near the limit). Items are admitted only against tokens granted for the window they are admitted in:
  a lease lapses, locally, at the end of its window (computed conservatively from when the request was
  sent, so it never outlives the backend's window).
- **Bound**: while the backend answers, across any number of replicas, the items admitted in one window
  never exceed the window's limit (the grants do not, and each admitted item spends a granted token of
  that window, before the window's end less `lapse_margin_s`). As with
  any fixed-window counter, two adjacent windows can together admit up to twice the limit within
  `window_s` seconds. The price of leasing is under-use: tokens a replica holds unused when the
  window ends are lost: up to a lease (or the unusable part of a too-large batch's grant) per replica
  per window.
- Envoy's near-limit ratio: a lease that leaves the window's counter at or above
  `near_limit_ratio × limit` is counted as near the limit (a metric, for alerting before refusals).
- Envoy's local cache of over-limit keys: once the backend has refused a tenant for a window, this
  replica refuses that tenant locally until the window ends, without asking the backend again.
- A lease that fails (backend down, or slower than `timeout_ms`) leaves its call to the tenant's
  `on_backend_error`: `allow` (Envoy's default) admits under the replica's own token bucket only
  (services/router/admission.py: up to the full quota per replica), `deny` refuses with UNAVAILABLE
  and a retry hint. Both are counted. After two failures in a row the backend is not asked again for
  `backend_retry_s`. A slow lease is not abandoned: its grant, when it lands, is kept.

`LeaseBook` is the pure bookkeeping (time passed in, unit-tested with a fake clock); `SharedQuota` is
the asyncio adapter that asks a `QuotaBackend` (services/router/quota_redis.py) for leases, one
request at a time per tenant.

Example::

    quota = SharedQuota(SharedQuotaConfig(), RedisQuotaBackend.for_config(RedisConfig(url="redis://redis:6379/0")))
    taken = await quota.take("acme", tenant.quota, items=3)   # OverQuotaError / UnavailableError
    ...
    quota.give_back("acme", 3, taken)   # the items were not admitted after all (the local bucket refused)
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from dataclasses import dataclass, field
from typing import Awaitable, Callable, Literal, Protocol

from services.common.errors import LimitExceededError, UnavailableError
from services.router.admission import OverQuotaError, Quota

log = logging.getLogger(__name__)

BackendErrorMode = Literal["allow", "deny"]

#: How `take` admitted the items: against shared tokens, or (backend failing, `allow`) without them.
TakeOutcome = Literal["shared", "backend_error_allowed", "unlimited"]


@dataclass(frozen=True)
class SharedTake:
    """What `SharedQuota.take` admitted: how, and (for `shared`) in which window, so that `give_back`
    returns the tokens only to that window."""

    outcome: TakeOutcome
    window: int = -1


@dataclass(frozen=True)
class SharedQuotaConfig:
    """`shared_quota:` in config/router.yaml, used while `redis.url` is set (services/router/redis_state.py);
    without it each router process keeps its own token buckets (services/router/admission.py), which is
    right for one replica."""

    #: Length of one counting window (the limit per window is items_per_s × window_s).
    window_s: float = 1.0
    #: A lease asks for this fraction of the window's limit (at least 1 item, at least what is needed).
    lease_fraction: float = 0.02
    #: Admissions that leave the window's counter at or above this share of the limit count as near it.
    near_limit_ratio: float = 0.8
    #: How long one backend call may take before it counts as a backend error.
    timeout_ms: int = 50
    #: After a backend error, how long the backend is not asked (each tenant's on_backend_error applies).
    backend_retry_s: float = 1.0
    #: What a tenant without its own `quota.on_backend_error` gets while the backend fails.
    on_backend_error: BackendErrorMode = "allow"

    def __post_init__(self) -> None:
        if not self.window_s >= 0.1 or abs(self.window_s * 1000 - round(self.window_s * 1000)) > 1e-6:
            raise ValueError(f"window_s must be at least 0.1 and a whole number of milliseconds, got {self.window_s}")
        if not 0 < self.lease_fraction <= 1:
            raise ValueError(f"lease_fraction must be in (0, 1], got {self.lease_fraction}")
        if not 0 < self.near_limit_ratio <= 1:
            raise ValueError(f"near_limit_ratio must be in (0, 1], got {self.near_limit_ratio}")
        if not 1 <= self.timeout_ms <= 1000:
            raise ValueError(f"timeout_ms must be between 1 and 1000 (admission waits this long at most), "
                             f"got {self.timeout_ms}")
        if not self.backend_retry_s > 0:
            raise ValueError(f"backend_retry_s must be > 0, got {self.backend_retry_s}")
        if self.on_backend_error not in ("allow", "deny"):
            raise ValueError(f"on_backend_error must be allow or deny, got {self.on_backend_error!r}")

    def window_limit(self, quota: Quota) -> int:
        """Items one tenant may be admitted per window, fleet-wide (at least 1)."""
        return max(1, math.floor(quota.items_per_s * self.window_s + 1e-9))

    def warnings(self, tenant: str, quota: Quota) -> list[str]:
        """What a tenant's quota means less precisely across replicas than in one process (logged at start)."""
        if quota.items_per_s <= 0:
            return []
        limit, notes = self.window_limit(quota), []
        if quota.items_per_s * self.window_s < 1:
            notes.append(f"tenant {tenant!r}: items_per_s {quota.items_per_s:g} is under one item per shared_quota "
                         f"window of {self.window_s:g} s: across replicas it is {limit} per window "
                         f"({limit / self.window_s:g} items/s); lengthen window_s")
        if quota.burst > limit:
            notes.append(f"tenant {tenant!r}: burst {quota.burst} is over the shared window's limit of {limit}: across "
                         f"replicas a batch of more than {limit} items is refused; set shared_quota.window_s to at "
                         f"least {quota.burst / quota.items_per_s:g} s to allow it")
        return notes

    @property
    def lapse_margin_s(self) -> float:
        """How much earlier than the backend's window end a lease lapses here: the local monotonic clock and
        Redis's may drift apart by up to ~0.1 % (NTP slewing) within a window, plus a millisecond."""
        return 0.001 + 0.001 * self.window_s

    def lease_items(self, quota: Quota) -> int:
        """How many tokens one lease asks for, beyond what the request needs."""
        return max(1, math.floor(self.window_limit(quota) * self.lease_fraction))


@dataclass(frozen=True)
class Grant:
    """A backend's answer to a lease request."""

    #: Tokens granted (0 .. asked), for the window that was current at the backend.
    granted: int
    #: Milliseconds (fractional) from the backend's now to the end of that window.
    window_left_ms: float
    #: The window's counter after the grant (items granted to all replicas in the window).
    used: int
    #: The window's number (backend time // window length): tokens of different windows never mix.
    window: int = 0


class QuotaBackend(Protocol):
    """Where the windows' counters live (services/router/quota_redis.py)."""

    async def lease(self, tenant: str, limit: int, amount: int, window_ms: int) -> Grant:
        """Grant up to `amount` of what is left of `limit` in the current window of `window_ms`."""
        ...

    async def warm(self) -> None:
        """Connect and prepare (e.g. load a script) before the first lease; may raise."""
        ...

    async def close(self) -> None:
        ...


@dataclass
class _Lease:
    tokens: int = 0
    window: int = -1
    #: Local monotonic time at which the tokens lapse (their window's end, conservatively early).
    lapses_at: float = 0.0
    #: Refuse locally until then (the backend refused this tenant for the window ending then).
    over_until: float = 0.0


@dataclass(frozen=True)
class Taken:
    """The items were admitted against tokens granted for `window`."""

    window: int


@dataclass(frozen=True)
class NeedLease:
    """Not enough tokens: ask the backend for `amount` more."""

    amount: int


@dataclass(frozen=True)
class Over:
    """Refused for the rest of the window; retry after `retry_after_s`."""

    retry_after_s: float


@dataclass
class LeaseBook:
    """Per-tenant tokens leased from the shared counters; pure (time is passed in)."""

    config: SharedQuotaConfig
    _leases: dict[str, _Lease] = field(default_factory=dict)

    def try_take(self, tenant: str, quota: Quota, items: int, now: float) -> Taken | NeedLease | Over:
        """Spend `items` tokens if this replica holds them for the current window; otherwise say
        whether to ask for a lease or (the backend refused this window) to refuse."""
        lease = self._leases.setdefault(tenant, _Lease())
        if now >= lease.lapses_at:
            lease.tokens = 0
        if lease.tokens >= items:
            lease.tokens -= items
            return Taken(lease.window)
        if now < lease.over_until:
            return Over(lease.over_until - now)
        return NeedLease(max(items - lease.tokens, self.config.lease_items(quota)))

    def granted(self, tenant: str, grant: Grant, asked_at: float) -> None:
        """Add what the backend granted. `asked_at`: local time the request was sent; the backend's window
        ended `window_left_ms` after some moment at or after it, so the tokens lapse at
        `asked_at + window_left_ms` less `lapse_margin_s` (for the two clocks' drift), never after the
        backend's window. Tokens still held from an earlier window are dropped: they never count in
        another window; a late answer for a window before the held one is ignored."""
        lease = self._leases.setdefault(tenant, _Lease())
        if grant.window < lease.window:
            return  # a late answer for a window already over here
        if grant.window != lease.window:
            lease.tokens = 0
            lease.window = grant.window
        lease.tokens += grant.granted
        lease.lapses_at = asked_at + grant.window_left_ms / 1000.0 - self.config.lapse_margin_s

    def refuse_until_window_end(self, tenant: str) -> None:
        """The backend could not grant what one request needs: refuse until the lease's window ends."""
        lease = self._leases.setdefault(tenant, _Lease())
        lease.over_until = lease.lapses_at

    def give_back(self, tenant: str, items: int, window: int, now: float) -> None:
        """Return tokens taken (in `window`) for items that were not admitted after all, while that
        window's lease still holds."""
        lease = self._leases.get(tenant)
        if lease is not None and lease.window == window and now < lease.lapses_at:
            lease.tokens += items

    def held(self, tenant: str, now: float) -> int:
        """Tokens this replica holds for the tenant's current window."""
        lease = self._leases.get(tenant)
        return lease.tokens if lease is not None and now < lease.lapses_at else 0


class QuotaMetrics(Protocol):
    """What SharedQuota counts (RouterMetrics implements it)."""

    def record_lease(self, result: str) -> None: ...

    def record_near_limit(self, tenant: str, qos_class: str) -> None: ...

    def record_quota_backend_error(self, mode: str) -> None: ...


class _NoMetrics:
    def record_lease(self, result: str) -> None:
        pass

    def record_near_limit(self, tenant: str, qos_class: str) -> None:
        pass

    def record_quota_backend_error(self, mode: str) -> None:
        pass


class SharedQuota:
    """The asyncio side: `take` spends leased tokens, asking the backend (one request at a time per
    tenant, for what every waiting call of that tenant needs) when they run out; a failing backend is
    handled by the tenant's `on_backend_error`.

    A lease that takes longer than `timeout_ms` is not abandoned: the waiting call is answered per
    `on_backend_error`, but the request goes on (so its connection survives) and a late grant is added
    to the tenant's tokens for its window. The backend counts as down (not asked for `backend_retry_s`)
    after FAILURES_BEFORE_DOWN failures in a row, so one slow reply does not put every tenant of the
    replica on `on_backend_error`."""

    #: Consecutive failed leases after which the backend is left alone for `backend_retry_s`.
    FAILURES_BEFORE_DOWN = 2
    #: How long `warm` may take (connecting, loading the script) before the first lease.
    WARM_TIMEOUT_S = 2.0

    def __init__(self, config: SharedQuotaConfig, backend: QuotaBackend, *, metrics: QuotaMetrics | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        """`clock` and `sleep`: the monotonic clock and how to wait on it (tests pass fakes)."""
        self.config = config
        self.backend = backend
        self.book = LeaseBook(config)
        self.metrics: QuotaMetrics = metrics or _NoMetrics()
        self._clock = clock
        self._sleep = sleep
        self._locks: dict[str, asyncio.Lock] = {}
        self._waiting: dict[str, int] = {}
        self._backend_down_until = 0.0
        self._failures = 0

    async def warm(self) -> bool:
        """Connect to the backend before traffic comes (a failure is logged; leases will try again)."""
        try:
            await asyncio.wait_for(self.backend.warm(), self.WARM_TIMEOUT_S)
            return True
        except (asyncio.CancelledError, KeyboardInterrupt):
            raise
        except Exception as error:  # noqa: BLE001 - reported, not fatal: on_backend_error covers it
            log.warning("shared quota: the backend is not reachable yet (%s); tenants get their on_backend_error "
                        "until it is", error)
            return False

    async def take(self, tenant: str, quota: Quota, items: int, *, qos_class: str = "") -> SharedTake:
        """Admit `items` against the tenant's fleet-wide quota, or raise OverQuotaError (the window's
        limit is reached, with the time to its end), LimitExceededError (more items than a window allows:
        never retryable) or UnavailableError (backend failing, `deny`)."""
        if quota.items_per_s <= 0:
            return SharedTake("unlimited")
        limit = self.config.window_limit(quota)
        if items > limit:
            raise LimitExceededError(f"{items} items is over tenant {tenant!r}'s limit of {limit} per "
                                     f"{self.config.window_s:g} s across router replicas; send batches of at most "
                                     f"{limit} items")
        step = self.book.try_take(tenant, quota, items, self._clock())
        if isinstance(step, Taken):
            return SharedTake("shared", step.window)
        if isinstance(step, Over):
            raise self._over(tenant, quota, step.retry_after_s)
        self._waiting[tenant] = self._waiting.get(tenant, 0) + items
        try:
            async with self._locks.setdefault(tenant, asyncio.Lock()):
                return await self._lease_and_take(tenant, quota, items, limit, qos_class)
        finally:
            self._waiting[tenant] -= items
            if not self._waiting[tenant]:
                del self._waiting[tenant]

    async def _lease_and_take(self, tenant: str, quota: Quota, items: int, limit: int, qos_class: str) -> SharedTake:
        for attempt in (1, 2, 3):
            # Another call may have leased while this one waited.
            step = self.book.try_take(tenant, quota, items, self._clock())
            if isinstance(step, Taken):
                return SharedTake("shared", step.window)
            if isinstance(step, Over):
                raise self._over(tenant, quota, step.retry_after_s)
            if self._clock() < self._backend_down_until:
                return self._backend_failed(tenant, quota)
            # Enough for every call of this tenant waiting now, not only this one (one round trip for all).
            amount = min(limit, max(step.amount, self._waiting.get(tenant, 0) - self.book.held(tenant, self._clock())))
            asked_at = self._clock()
            request = asyncio.ensure_future(self.backend.lease(tenant, limit, amount, round(self.config.window_s * 1000)))
            try:
                grant = await asyncio.wait_for(asyncio.shield(request), self.config.timeout_ms / 1000.0)
            except (asyncio.CancelledError, KeyboardInterrupt):
                self._finish_late(tenant, request, asked_at)
                raise
            except Exception:  # noqa: BLE001 - any backend failure (down, slow, refused) is handled alike
                self._finish_late(tenant, request, asked_at)
                self._failures += 1
                if self._failures >= self.FAILURES_BEFORE_DOWN:
                    self._backend_down_until = self._clock() + self.config.backend_retry_s
                return self._backend_failed(tenant, quota)
            self._failures = 0
            now = self._clock()
            self.book.granted(tenant, grant, asked_at)
            self.metrics.record_lease("granted" if grant.granted >= amount else "partial" if grant.granted else "refused")
            step = self.book.try_take(tenant, quota, items, now)
            if isinstance(step, Taken):
                if grant.used >= self.config.near_limit_ratio * limit:
                    self.metrics.record_near_limit(tenant, qos_class)
                return SharedTake("shared", step.window)
            if grant.granted >= amount and attempt < 3:
                # Granted in full, but its window ended on the way back, or ends within the lapse margin (a
                # call landing in the window's last millisecond): wait out that tail, then ask in the new one.
                # (window_left_ms is whole milliseconds: 0 may be up to 1 ms, so wait a millisecond more.)
                tail = asked_at + grant.window_left_ms / 1000.0 - now
                if tail >= 0:
                    await self._sleep(min(tail + 0.001, 2 * self.config.lapse_margin_s))
                continue
            self.book.refuse_until_window_end(tenant)
            retry = max(0.001, asked_at + grant.window_left_ms / 1000.0 - now)
            raise self._over(tenant, quota, retry)
        raise self._over(tenant, quota, self.config.window_s)  # pragma: no cover - three lapsed full grants

    def _finish_late(self, tenant: str, request: asyncio.Future[Grant], asked_at: float) -> None:
        """Let a lease that outlived its wait finish in the background; a grant it brings is kept."""
        if request.done():
            if not request.cancelled():
                request.exception()  # retrieved: no "never retrieved" warning
            return

        def landed(done: asyncio.Future[Grant]) -> None:
            if not done.cancelled() and done.exception() is None:
                self.book.granted(tenant, done.result(), asked_at)

        request.add_done_callback(landed)

    def give_back(self, tenant: str, items: int, taken: SharedTake) -> None:
        """Return the tokens of items `take` admitted that were then refused locally."""
        if taken.outcome == "shared":
            self.book.give_back(tenant, items, taken.window, self._clock())

    async def close(self) -> None:
        await self.backend.close()

    def _over(self, tenant: str, quota: Quota, retry_after_s: float) -> OverQuotaError:
        return OverQuotaError(f"tenant {tenant!r} is over its quota of {quota.items_per_s:g} items/s across all "
                              f"router replicas; retry in {retry_after_s * 1000:.0f} ms", retry_after_s)

    def _backend_failed(self, tenant: str, quota: Quota) -> SharedTake:
        mode = quota.on_backend_error or self.config.on_backend_error
        self.metrics.record_quota_backend_error(mode)
        if mode == "deny":
            error = UnavailableError(f"the shared quota backend is unavailable and tenant {tenant!r} is set to "
                                     "on_backend_error: deny; retry shortly")
            error.retry_after_s = max(self.config.backend_retry_s, 0.05)
            raise error
        return SharedTake("backend_error_allowed")
