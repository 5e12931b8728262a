"""The shared quota's bookkeeping (services/router/shared_quota.py) with a fake clock and an in-memory
backend that counts windows the way the Redis script does: leases, the per-window bound across
replicas, the local over-limit cache, tokens that never cross a window, backend failures."""

from __future__ import annotations

import asyncio
import math

import pytest

from services.common.errors import LimitExceededError, UnavailableError
from services.router.admission import OverQuotaError, Quota
from services.router.redis_state import RedisConfig
from services.router.shared_quota import (Grant, LeaseBook, NeedLease, Over, SharedQuota, SharedQuotaConfig,
                                          SharedTake, Taken)


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class MemoryBackend:
    """The Redis script's semantics over a dict, on the test's clock (same clock for every replica)."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.counters: dict[tuple[str, int], int] = {}
        self.calls = 0
        self.fail = False

    async def lease(self, tenant: str, limit: int, amount: int, window_ms: int) -> Grant:
        self.calls += 1
        if self.fail:
            raise ConnectionError("backend down")
        now_ms = self.clock.now * 1000
        window = math.floor(now_ms / window_ms)
        used = self.counters.get((tenant, window), 0)
        grant = max(0, min(amount, limit - used))
        self.counters[(tenant, window)] = used + grant
        return Grant(grant, int((window + 1) * window_ms - now_ms), used + grant, window)

    async def warm(self) -> None:
        if self.fail:
            raise ConnectionError("backend down")

    async def close(self) -> None:
        pass


class Recorder:
    def __init__(self) -> None:
        self.leases: list[str] = []
        self.near: list[str] = []
        self.errors: list[str] = []

    def record_lease(self, result: str) -> None:
        self.leases.append(result)

    def record_near_limit(self, tenant: str, qos_class: str) -> None:
        self.near.append(tenant)

    def record_quota_backend_error(self, mode: str) -> None:
        self.errors.append(mode)


CONFIG = SharedQuotaConfig(window_s=1.0, lease_fraction=0.05)
QUOTA = Quota(items_per_s=100)


def test_limits_and_lease_sizes() -> None:
    assert CONFIG.window_limit(QUOTA) == 100 and CONFIG.lease_items(QUOTA) == 5
    assert CONFIG.window_limit(Quota(items_per_s=0.3)) == 1 and CONFIG.lease_items(Quota(items_per_s=0.3)) == 1
    assert SharedQuotaConfig(window_s=10).window_limit(Quota(items_per_s=2.5)) == 25


@pytest.mark.parametrize("bad", [{"window_s": 0}, {"window_s": 0.05}, {"window_s": 1.0005}, {"lease_fraction": 0},
                                 {"lease_fraction": 1.5}, {"near_limit_ratio": 0}, {"timeout_ms": 0},
                                 {"timeout_ms": 5000}, {"backend_retry_s": 0}, {"on_backend_error": "maybe"}])
def test_config_is_validated(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        SharedQuotaConfig(**bad)  # type: ignore[arg-type]


def test_the_book_spends_tokens_of_the_current_window_only() -> None:
    book = LeaseBook(CONFIG)
    assert book.try_take("a", QUOTA, 3, now=0.0) == NeedLease(5)
    book.granted("a", Grant(5, 400, 5, window=7), asked_at=0.0)
    assert book.try_take("a", QUOTA, 3, now=0.1) == Taken(7)
    assert book.held("a", 0.1) == 2
    assert book.try_take("a", QUOTA, 3, now=0.1) == NeedLease(5)  # needs 1 more; leases at least 5
    assert book.try_take("a", QUOTA, 2, now=0.39) == Taken(7)
    book.give_back("a", 2, window=7, now=0.39)
    assert book.held("a", 0.39) == 2
    # At the window's end the tokens lapse; tokens given back for an old window are not kept.
    assert book.held("a", 0.4) == 0
    book.give_back("a", 2, window=7, now=0.41)
    assert book.held("a", 0.41) == 0
    assert book.try_take("a", QUOTA, 1, now=0.41) == NeedLease(5)


def test_a_grant_for_a_new_window_drops_the_old_windows_tokens() -> None:
    book = LeaseBook(CONFIG)
    book.granted("a", Grant(5, 900, 5, window=1), asked_at=0.0)
    book.granted("a", Grant(5, 1000, 10, window=2), asked_at=0.05)  # the backend's window moved on
    assert book.held("a", 0.1) == 5
    book.give_back("a", 3, window=1, now=0.1)
    assert book.held("a", 0.1) == 5


def test_a_refused_window_is_refused_locally_until_it_ends() -> None:
    book = LeaseBook(CONFIG)
    book.granted("a", Grant(0, 300, 100, window=1), asked_at=0.0)
    book.refuse_until_window_end("a")
    step = book.try_take("a", QUOTA, 1, now=0.1)
    assert isinstance(step, Over) and step.retry_after_s == pytest.approx(0.2 - CONFIG.lapse_margin_s)
    assert isinstance(book.try_take("a", QUOTA, 1, now=0.3), NeedLease)


async def test_replicas_together_never_admit_more_than_the_window_limit() -> None:
    clock = Clock()
    backend = MemoryBackend(clock)
    replicas = [SharedQuota(CONFIG, backend, clock=clock) for _ in range(4)]
    admitted: dict[int, int] = {}
    for step in range(3000):  # 3 s of traffic in 1 ms steps, every replica asked every step
        clock.now = 1000.0 + step / 1000
        for replica in replicas:
            try:
                taken = await replica.take("acme", QUOTA, 1)
            except OverQuotaError as error:
                assert 0 < (error.retry_after_s or 0) <= 1.0
                continue
            admitted[taken.window] = admitted.get(taken.window, 0) + 1
    assert sorted(admitted) == [1000, 1001, 1002]
    assert all(count <= 100 for count in admitted.values())
    # Under-use is at most lease_items - 1 per replica per window.
    assert all(count >= 100 - 4 * (CONFIG.lease_items(QUOTA) - 1) for count in admitted.values())
    # Leasing: far fewer backend calls than items; over-limit windows are refused locally.
    assert backend.calls < 200


async def test_one_replica_may_use_the_whole_window() -> None:
    clock = Clock()
    quota = SharedQuota(CONFIG, MemoryBackend(clock), clock=clock)
    for _ in range(20):
        assert (await quota.take("acme", QUOTA, 5)).outcome == "shared"
    with pytest.raises(OverQuotaError, match="across all router replicas"):
        await quota.take("acme", QUOTA, 1)


async def test_a_batch_that_does_not_fit_keeps_the_partial_grant_for_smaller_requests() -> None:
    clock = Clock()
    backend = MemoryBackend(clock)
    quota = SharedQuota(CONFIG, backend, clock=clock)
    for _ in range(19):
        await quota.take("acme", QUOTA, 5)  # 95 of 100 granted
    with pytest.raises(OverQuotaError):
        await quota.take("acme", QUOTA, 10)  # granted 5 (partial), needs 10
    calls = backend.calls
    for _ in range(5):
        await quota.take("acme", QUOTA, 1)  # the partial grant serves smaller requests
    with pytest.raises(OverQuotaError):
        await quota.take("acme", QUOTA, 1)
    assert backend.calls == calls  # refused from the local over-limit cache, the backend not asked


async def test_a_batch_over_the_window_limit_is_refused_for_good() -> None:
    quota = SharedQuota(CONFIG, MemoryBackend(Clock()), clock=Clock())
    with pytest.raises(LimitExceededError, match="batches of at most 100 items") as refused:
        await quota.take("acme", QUOTA, 101)
    assert refused.value.retry_after_s is None  # retrying the same batch cannot help


def test_quotas_that_replicas_cannot_keep_exactly_are_reported() -> None:
    assert CONFIG.warnings("acme", QUOTA) == []
    slow, bursty = CONFIG.warnings("a", Quota(items_per_s=0.5)), CONFIG.warnings("b", Quota(items_per_s=100, burst=300))
    assert len(slow) == 1 and "under one item" in slow[0]
    assert len(bursty) == 1 and "window_s to at least 3 s" in bursty[0]


async def test_tenants_do_not_share_a_window() -> None:
    clock = Clock()
    quota = SharedQuota(CONFIG, MemoryBackend(clock), clock=clock)
    for _ in range(10):
        await quota.take("acme", QUOTA, 10)
    assert (await quota.take("globex", QUOTA, 10)).outcome == "shared"


async def test_an_unlimited_tenant_never_asks_the_backend() -> None:
    backend = MemoryBackend(Clock())
    quota = SharedQuota(CONFIG, backend, clock=Clock())
    assert await quota.take("acme", Quota(), 50) == SharedTake("unlimited")
    assert backend.calls == 0


async def test_concurrent_calls_share_one_lease_request() -> None:
    clock = Clock()
    backend = MemoryBackend(clock)
    quota = SharedQuota(CONFIG, backend, clock=clock)
    results = await asyncio.gather(*(quota.take("acme", QUOTA, 1) for _ in range(5)))
    assert all(r.outcome == "shared" for r in results)
    assert backend.calls == 1


async def test_near_limit_and_lease_results_are_counted() -> None:
    clock = Clock()
    recorder = Recorder()
    quota = SharedQuota(CONFIG, MemoryBackend(clock), metrics=recorder, clock=clock)
    for _ in range(20):
        await quota.take("acme", QUOTA, 5)
    assert recorder.leases == ["granted"] * 20
    assert len(recorder.near) == 5  # counters 80, 85, ..., 100 are at or above 0.8 × 100
    with pytest.raises(OverQuotaError):
        await quota.take("acme", QUOTA, 1)
    assert recorder.leases[-1] == "refused"


async def test_backend_errors_follow_on_backend_error_and_are_not_retried_at_once() -> None:
    clock = Clock()
    backend = MemoryBackend(clock)
    recorder = Recorder()
    quota = SharedQuota(CONFIG, backend, metrics=recorder, clock=clock)
    backend.fail = True
    assert (await quota.take("acme", QUOTA, 1)).outcome == "backend_error_allowed"
    with pytest.raises(UnavailableError, match="on_backend_error: deny") as refused:
        await quota.take("globex", Quota(items_per_s=100, on_backend_error="deny"), 1)
    assert refused.value.retry_after_s == CONFIG.backend_retry_s
    assert backend.calls == 2  # two failures in a row: the backend is now left alone
    assert (await quota.take("initech", QUOTA, 1)).outcome == "backend_error_allowed"
    assert backend.calls == 2
    assert recorder.errors == ["allow", "deny", "allow"]
    backend.fail = False
    clock.now += CONFIG.backend_retry_s
    assert (await quota.take("acme", QUOTA, 1)).outcome == "shared"


async def test_a_slow_backend_counts_as_failed_and_its_late_grant_is_kept() -> None:
    class Slow(MemoryBackend):
        async def lease(self, tenant: str, limit: int, amount: int, window_ms: int) -> Grant:
            await asyncio.sleep(0.05)
            return await super().lease(tenant, limit, amount, window_ms)

    config = SharedQuotaConfig(timeout_ms=10, on_backend_error="deny")
    clock = Clock()
    backend = Slow(clock)
    quota = SharedQuota(config, backend, clock=clock)
    with pytest.raises(UnavailableError):
        await quota.take("acme", QUOTA, 1)
    await asyncio.sleep(0.1)  # the request was not abandoned: its grant lands
    assert quota.book.held("acme", clock.now) == config.lease_items(QUOTA)
    assert (await quota.take("acme", QUOTA, 1)).outcome == "shared" and backend.calls == 1


async def test_a_grant_whose_window_ended_on_the_way_is_asked_again() -> None:
    clock = Clock(1000.999)

    class Late(MemoryBackend):
        async def lease(self, tenant: str, limit: int, amount: int, window_ms: int) -> Grant:
            grant = await super().lease(tenant, limit, amount, window_ms)
            self.clock.now += 0.005  # the answer arrives after its window (and the lapse margin) ended
            return grant

    backend = Late(clock)
    quota = SharedQuota(CONFIG, backend, clock=clock)
    taken = await quota.take("acme", QUOTA, 1)
    assert taken.outcome == "shared" and taken.window == 1001 and backend.calls == 2


async def test_a_grant_landing_in_the_windows_last_millisecond_waits_out_the_tail_and_asks_again() -> None:
    clock = Clock(1000.9995)  # 0.5 ms left: inside the lapse margin, so the grant lapses as it lands
    backend = MemoryBackend(clock)
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock.now += seconds

    quota = SharedQuota(CONFIG, backend, clock=clock, sleep=sleep)
    taken = await quota.take("acme", QUOTA, 1)
    assert taken.outcome == "shared" and taken.window == 1001 and backend.calls == 2
    assert slept == [pytest.approx(0.001)]  # the tail and half a millisecond: past the window's end


async def test_one_lease_serves_every_waiting_call() -> None:
    clock = Clock()

    class Slowish(MemoryBackend):
        async def lease(self, tenant: str, limit: int, amount: int, window_ms: int) -> Grant:
            await asyncio.sleep(0.01)
            return await super().lease(tenant, limit, amount, window_ms)

    backend = Slowish(clock)
    quota = SharedQuota(CONFIG, backend, clock=clock)
    results = await asyncio.gather(*(quota.take("acme", QUOTA, 3) for _ in range(10)))  # 30 items > lease of 5
    assert all(r.outcome == "shared" for r in results)
    assert backend.calls <= 2


async def test_given_back_tokens_serve_the_next_request() -> None:
    clock = Clock()
    backend = MemoryBackend(clock)
    quota = SharedQuota(CONFIG, backend, clock=clock)
    taken = await quota.take("acme", QUOTA, 5)
    quota.give_back("acme", 5, taken)
    assert quota.book.held("acme", clock.now) == 5
    await quota.take("acme", QUOTA, 5)
    assert backend.calls == 1


def test_the_redis_config_is_validated_and_never_shows_its_url() -> None:
    assert not RedisConfig().enabled and RedisConfig(url="redis://r:6379/0").enabled
    assert RedisConfig(url="unix:///run/redis.sock", key_prefix="mesh-a").key("quota") == "mesh-a:quota"
    assert "secret" not in repr(RedisConfig(url="redis://:secret@r:6379/0"))
    for bad in ({"url": "http://r"}, {"key_prefix": ""}, {"key_prefix": "a b"}, {"key_prefix": "{a}"}):
        with pytest.raises(ValueError):
            RedisConfig(**bad)
