"""Failed-authentication throttle, per peer host and global. Pure (no gRPC), with an injected clock.

Why this shape: a wrong key costs the server a SHA-256 and an error answer, and a client that tries
thousands of keys a second is guessing. So failures are counted in a sliding window of `window_s`:

* per peer host (the gRPC peer without its source port, since a guesser opens new connections):
  after `peer_failures` failures in the window the host is blocked until the oldest of them leaves the
  window, and every call from it is refused *before its key is looked at* (so guesses stop counting);
* globally: after `global_failures` failures in the window from all hosts together (many hosts
  guessing a little each), every host that failed at least once in the window is blocked the same way.

Valid keys are never slowed: nothing sleeps, a check is O(1), and a host with no recent failure is
never blocked, whatever the global count. A host that is blocked is refused even with a valid key
(it produced `peer_failures` failures in the last `window_s`); that is the trade-off of any
per-source throttle, documented in docs/security.md. Memory is bounded: at most `max_peers` hosts are
tracked (the least recently failing is forgotten first).

Not thread-safe: each servicer calls it from its event loop.

Example::

    throttle = AuthThrottle(ThrottleConfig(peer_failures=5, window_s=60), clock=time.monotonic)
    wait = throttle.blocked("ipv4:10.0.0.7")       # None, or seconds until the host may try again
    if key_is_wrong:
        wait = throttle.failed("ipv4:10.0.0.7")    # None, or seconds: this failure crossed a limit
"""

from __future__ import annotations

import collections
import time
from dataclasses import dataclass
from typing import Callable

from services.common.errors import LimitExceededError


@dataclass(frozen=True)
class ThrottleConfig:
    """Failed attempts allowed per peer host and in total within `window_s`. 0 turns a limit off."""

    peer_failures: int = 20
    global_failures: int = 500
    window_s: float = 60.0
    max_peers: int = 10_000

    def __post_init__(self) -> None:
        for name in ("peer_failures", "global_failures"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0 (0 = no limit), got {getattr(self, name)}")
        if self.window_s <= 0:
            raise ValueError(f"window_s must be > 0, got {self.window_s}")
        if self.max_peers < 1:
            raise ValueError(f"max_peers must be >= 1, got {self.max_peers}")


class AuthThrottledError(LimitExceededError):
    """Too many failed authentications from this peer (or in total): RESOURCE_EXHAUSTED + RetryInfo."""

    def __init__(self, retry_after_s: float) -> None:
        self.retry_after_s = max(retry_after_s, 0.001)
        super().__init__(f"too many failed authentication attempts; retry in {self.retry_after_s:.1f} s")


def peer_host(peer: str) -> str:
    """The host part of a gRPC peer string: 'ipv4:10.0.0.7:51234' -> 'ipv4:10.0.0.7',
    'ipv6:[::1]:51234' -> 'ipv6:[::1]'; anything else (unix sockets) unchanged."""
    kind, sep, address = peer.partition(":")
    if not sep or kind not in ("ipv4", "ipv6"):
        return peer
    host, colon, port = address.rpartition(":")
    return f"{kind}:{host}" if colon and port.isdigit() else peer


class AuthThrottle:
    """See the module docstring."""

    def __init__(self, config: ThrottleConfig = ThrottleConfig(), *, clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self._clock = clock
        #: host -> times of its failures in the window (oldest first); ordered by last failure.
        self._peers: collections.OrderedDict[str, collections.deque[float]] = collections.OrderedDict()
        self._global: collections.deque[float] = collections.deque()

    def blocked(self, host: str) -> float | None:
        """Seconds until `host` may try again, or None when it is not blocked."""
        now = self._clock()
        self._expire_global(now)
        failures = self._peers.get(host)
        if failures is None:
            return None
        self._expire(failures, now)
        if not failures:
            del self._peers[host]
            return None
        config = self.config
        waits = []
        if config.peer_failures and len(failures) >= config.peer_failures:
            waits.append(failures[-config.peer_failures] + config.window_s - now)
        if config.global_failures and len(self._global) >= config.global_failures:
            waits.append(self._global[-config.global_failures] + config.window_s - now)
        return max(waits) if waits else None

    def failed(self, host: str) -> float | None:
        """Record one failed attempt by `host`; returns `blocked(host)` after it."""
        now = self._clock()
        failures = self._peers.pop(host, None)
        if failures is None:
            failures = collections.deque()
            while len(self._peers) >= self.config.max_peers:
                self._peers.popitem(last=False)  # forget the host whose last failure is oldest
        self._peers[host] = failures  # now the most recent
        failures.append(now)
        if self.config.global_failures:
            self._global.append(now)
        cap = max(self.config.peer_failures, 1)
        while len(failures) > cap:  # only the newest `peer_failures` matter
            failures.popleft()
        while len(self._global) > self.config.global_failures:
            self._global.popleft()
        return self.blocked(host)

    @property
    def tracked_peers(self) -> int:
        return len(self._peers)

    def _expire(self, failures: collections.deque[float], now: float) -> None:
        while failures and failures[0] <= now - self.config.window_s:
            failures.popleft()

    def _expire_global(self, now: float) -> None:
        self._expire(self._global, now)
