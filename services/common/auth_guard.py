"""One authentication check under the failed-auth throttle (`services.common.auth_throttle`), counted
in Prometheus. Used by the router's public API, its PolicyAdmin API and the modality services'
internal ports, each with its own `surface` label.

Metrics (one `AuthMetrics` per registry):

* `auditmesh_auth_failures_total{surface}`: calls whose credential was missing or wrong;
* `auditmesh_auth_throttled_total{surface}`: calls refused with RESOURCE_EXHAUSTED by the throttle.

Example::

    guard = AuthGuard(AuthThrottle(), AuthMetrics(registry), surface="public")
    tenant = guard.check(context.peer(), lambda: directory.authenticate(key))
    # UnauthenticatedError (counted), or AuthThrottledError (RESOURCE_EXHAUSTED, retry_after_s set)
"""

from __future__ import annotations

from typing import Callable, TypeVar

from prometheus_client import CollectorRegistry, Counter

from services.common.auth_throttle import AuthThrottle, AuthThrottledError, peer_host
from services.common.errors import UnauthenticatedError

T = TypeVar("T")


class AuthMetrics:
    """The auth counters of one registry (shared by every guard of the process)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.failures = Counter("auditmesh_auth_failures", "Calls with a missing or wrong credential",
                                ["surface"], registry=registry)
        self.throttled = Counter("auditmesh_auth_throttled", "Calls refused by the failed-authentication throttle",
                                 ["surface"], registry=registry)


class AuthGuard:
    """See the module docstring."""

    def __init__(self, throttle: AuthThrottle, metrics: AuthMetrics | None = None, *, surface: str) -> None:
        self.throttle = throttle
        self.metrics = metrics
        self.surface = surface

    def check(self, peer: str, authenticate: Callable[[], T]) -> T:
        """`authenticate()` unless `peer`'s host is throttled; a failure (UnauthenticatedError) is
        recorded, and becomes AuthThrottledError when it crosses a limit."""
        host = peer_host(peer)
        wait = self.throttle.blocked(host)
        if wait is not None:
            self._count_throttled()
            raise AuthThrottledError(wait)
        try:
            return authenticate()
        except UnauthenticatedError:
            if self.metrics is not None:
                self.metrics.failures.labels(self.surface).inc()
            wait = self.throttle.failed(host)
            if wait is not None:
                self._count_throttled()
                raise AuthThrottledError(wait) from None
            raise

    def _count_throttled(self) -> None:
        if self.metrics is not None:
            self.metrics.throttled.labels(self.surface).inc()
