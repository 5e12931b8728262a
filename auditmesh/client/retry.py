"""When to send a refused item again, and after how long. Pure: no gRPC, no clock, the random source
is passed in.

What the router sends (protos/auditmesh/v1/moderation.proto) and what the policy does with it:

* RESOURCE_EXHAUSTED with a google.rpc.RetryInfo (over the tenant's quota or in-flight cap, a full
  queue): wait the router's delay, plus a little jitter so callers told the same delay do not all
  come back in the same millisecond.
* RESOURCE_EXHAUSTED "Concurrent RPC limit exceeded!" (gRPC's own call limit of a lane, no
  RetryInfo): back off exponentially with jitter.
* RESOURCE_EXHAUSTED for a size limit (no RetryInfo, any other message): never; the same item would
  be refused again.
* UNAVAILABLE (a router shutting down or not reachable) and CANCELLED (a lane refusing calls while its
  backlog is full, before reading them): back off exponentially with jitter; with several router
  addresses, the next attempt goes to the next one.
* Anything else (INVALID_ARGUMENT, PERMISSION_DENIED, DEADLINE_EXCEEDED, ...): never.

A retry that could not start before the item's deadline is not made: the caller gets the error at
once instead of after a wait that cannot succeed.

Example::

    >>> import random
    >>> policy = RetryPolicy(initial_backoff_s=0.1, max_backoff_s=1.0)
    >>> policy.delay_s(1, "UNAVAILABLE", "", None, remaining_s=5.0, rng=random.Random(1)) is not None
    True
    >>> policy.delay_s(1, "INVALID_ARGUMENT", "empty text", None, remaining_s=5.0, rng=random.Random(1)) is None
    True
    >>> 0.25 <= policy.delay_s(1, "RESOURCE_EXHAUSTED", "over quota", 0.25, remaining_s=5.0, rng=random.Random(1)) <= 0.275
    True
"""

from __future__ import annotations

import random
from dataclasses import dataclass

#: The message gRPC itself answers a call over a server's `maximum_concurrent_rpcs` with.
CONCURRENT_RPC_LIMIT_MESSAGE = "Concurrent RPC limit exceeded"
#: Codes retried with backoff whatever the message (see the module docstring).
BACKOFF_CODES = frozenset({"UNAVAILABLE", "CANCELLED"})


@dataclass(frozen=True)
class RetryPolicy:
    """Retry settings (validated on construction).

    `max_attempts` counts the first send (1 = never retry). Backoff before retry n (n = 1, 2, ...) is
    drawn uniformly from [b/2, b] with b = min(max_backoff_s, initial_backoff_s * multiplier**(n-1))
    ("equal jitter"); a RetryInfo delay d is honoured as d * (1 + U[0, retry_info_jitter]).
    """

    max_attempts: int = 5
    initial_backoff_s: float = 0.02
    max_backoff_s: float = 1.0
    multiplier: float = 2.0
    retry_info_jitter: float = 0.1

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1 (1 = no retries), got {self.max_attempts}")
        if self.initial_backoff_s <= 0 or self.max_backoff_s < self.initial_backoff_s:
            raise ValueError(f"need 0 < initial_backoff_s <= max_backoff_s, got {self.initial_backoff_s} "
                             f"and {self.max_backoff_s}")
        if self.multiplier < 1:
            raise ValueError(f"multiplier must be >= 1, got {self.multiplier}")
        if not 0 <= self.retry_info_jitter <= 1:
            raise ValueError(f"retry_info_jitter must be in [0, 1], got {self.retry_info_jitter}")

    def retryable(self, code: str, message: str, retry_after_s: float | None) -> bool:
        """Whether an error with this status name, message and RetryInfo hint is worth another try."""
        if code == "RESOURCE_EXHAUSTED":
            return retry_after_s is not None or CONCURRENT_RPC_LIMIT_MESSAGE in message
        return code in BACKOFF_CODES

    def backoff_s(self, retry: int, rng: random.Random) -> float:
        """The jittered exponential backoff before retry number `retry` (1 = the first retry)."""
        ceiling = min(self.max_backoff_s, self.initial_backoff_s * self.multiplier ** (retry - 1))
        return ceiling / 2 + rng.random() * ceiling / 2

    def delay_s(self, attempts: int, code: str, message: str, retry_after_s: float | None, *, remaining_s: float,
                rng: random.Random) -> float | None:
        """Seconds to wait before sending again an item already sent `attempts` times that failed with
        `code` / `message` / `retry_after_s`, or None to give up now (not retryable, out of attempts, or
        the wait would not end `remaining_s` before its deadline)."""
        if attempts >= self.max_attempts or not self.retryable(code, message, retry_after_s):
            return None
        if retry_after_s is not None:
            delay = max(0.0, retry_after_s) * (1 + rng.random() * self.retry_info_jitter)
        else:
            delay = self.backoff_s(attempts, rng)
        return delay if delay < remaining_s else None


NO_RETRIES = RetryPolicy(max_attempts=1)

__all__ = ["BACKOFF_CODES", "CONCURRENT_RPC_LIMIT_MESSAGE", "NO_RETRIES", "RetryPolicy"]
