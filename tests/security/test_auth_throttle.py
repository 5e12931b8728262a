"""Issue 12 item 7: the failed-authentication throttle (services/common/auth_throttle.py) and its guard
(services/common/auth_guard.py), with a fake clock. Before the fix there was no throttle: 2,000 wrong
keys in 1.3 s were all answered UNAUTHENTICATED."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from services.common.auth_guard import AuthGuard, AuthMetrics
from services.common.auth_throttle import AuthThrottle, AuthThrottledError, ThrottleConfig, peer_host
from services.common.errors import UnauthenticatedError
from services.common.status import retry_after_s, status_for
from tests.stubs import FakeClock


def wrong() -> str:
    raise UnauthenticatedError("unknown API key")


def test_peer_host_drops_the_source_port() -> None:
    assert peer_host("ipv4:10.0.0.7:51234") == "ipv4:10.0.0.7"
    assert peer_host("ipv6:[::1]:51234") == "ipv6:[::1]"
    assert peer_host("unix:/tmp/sock") == "unix:/tmp/sock"


def test_a_host_is_blocked_after_its_failures_until_the_window_moves_on() -> None:
    clock = FakeClock()
    throttle = AuthThrottle(ThrottleConfig(peer_failures=3, global_failures=0, window_s=10.0), clock=clock)
    assert [throttle.failed("h") for _ in range(2)] == [None, None]
    clock.now += 4.0
    assert throttle.failed("h") == pytest.approx(6.0)  # the first failure leaves the window in 6 s
    assert throttle.blocked("h") == pytest.approx(6.0)
    assert throttle.blocked("other") is None  # another host is not affected
    clock.now += 6.0
    assert throttle.blocked("h") is None  # one failure left the window: 2 of 3


def test_global_limit_blocks_only_hosts_that_failed() -> None:
    clock = FakeClock()
    throttle = AuthThrottle(ThrottleConfig(peer_failures=100, global_failures=5, window_s=10.0), clock=clock)
    for i in range(5):  # five hosts guessing once each
        throttle.failed(f"guesser-{i}")
    assert throttle.blocked("guesser-0") == pytest.approx(10.0)
    assert throttle.blocked("a-valid-client") is None  # never failed: never blocked
    clock.now += 10.0
    assert throttle.blocked("guesser-0") is None


def test_memory_is_bounded_by_max_peers() -> None:
    throttle = AuthThrottle(ThrottleConfig(peer_failures=2, global_failures=0, max_peers=100), clock=FakeClock())
    for i in range(10_000):
        throttle.failed(f"host-{i}")
    assert throttle.tracked_peers == 100


def test_bad_settings_name_the_field() -> None:
    with pytest.raises(ValueError, match="window_s"):
        ThrottleConfig(window_s=0)
    with pytest.raises(ValueError, match="peer_failures"):
        ThrottleConfig(peer_failures=-1)


def test_guard_answers_resource_exhausted_with_retry_info_and_counts() -> None:
    registry = CollectorRegistry()
    clock = FakeClock()
    guard = AuthGuard(AuthThrottle(ThrottleConfig(peer_failures=3, window_s=30.0), clock=clock), AuthMetrics(registry),
                      surface="public")
    peer = "ipv4:192.0.2.1:40000"
    for _ in range(2):
        with pytest.raises(UnauthenticatedError):
            guard.check(peer, wrong)
    with pytest.raises(AuthThrottledError) as crossed:
        guard.check(peer, wrong)
    error = crossed.value
    assert status_for(error) is not None and status_for(error).name == "RESOURCE_EXHAUSTED"  # type: ignore[union-attr]
    assert retry_after_s(error) == pytest.approx(30.0)
    # From a new source port of the same host: refused before the key is looked at, valid or not.
    looked_at = []
    with pytest.raises(AuthThrottledError):
        guard.check("ipv4:192.0.2.1:40001", lambda: looked_at.append(1))
    assert looked_at == []
    # A valid key from another host is not slowed or refused.
    assert guard.check("ipv4:192.0.2.2:1", lambda: "tenant") == "tenant"
    value = registry.get_sample_value
    assert value("auditmesh_auth_failures_total", {"surface": "public"}) == 3
    assert value("auditmesh_auth_throttled_total", {"surface": "public"}) == 2
