"""When to restart a crashed child process: the launcher's restart policy, pure (no processes).

The launcher (`services.launcher`) tells a `Supervisor` when it started a child and when one exited;
the supervisor answers with a `Restart` decision (after how long, which attempt, why) and says which
children are due to start again. Time comes from an injected monotonic clock, so the policy is tested
with a fake clock and no processes.

Backoff: the first restart after a crash waits `initial_delay_s`, each further consecutive crash
`multiplier` times longer, up to `max_delay_s`. A child that stayed up for `reset_after_s` or more
before it died counts as healthy again: its next restart waits `initial_delay_s` once more. So a one-off
crash is repaired at once, and a child that cannot start (a bad config, a port taken) is retried at a
bounded, slow rate instead of in a tight loop.

Example::

    supervisor = Supervisor(RestartPolicy(initial_delay_s=0.5, max_delay_s=30), clock=time.monotonic)
    supervisor.started("text")
    restart = supervisor.exited("text", -9)   # kill -9
    restart.describe()   # 'text exited (killed by signal SIGKILL) after 12.0 s up: restart #1 in 0.5 s'
    ...
    for child in supervisor.due():            # once 0.5 s have passed
        start(child); supervisor.started(child)
"""

from __future__ import annotations

import signal
import time
from dataclasses import dataclass, field
from typing import Callable


@dataclass(frozen=True)
class RestartPolicy:
    """Exponential backoff between restarts of one child, capped, reset after a healthy run."""

    initial_delay_s: float = 0.5
    multiplier: float = 2.0
    max_delay_s: float = 30.0
    #: A child up at least this long before it died starts its backoff again from `initial_delay_s`.
    reset_after_s: float = 60.0

    def __post_init__(self) -> None:
        if self.initial_delay_s < 0:
            raise ValueError(f"initial_delay_s must be >= 0, got {self.initial_delay_s}")
        if self.multiplier < 1:
            raise ValueError(f"multiplier must be >= 1, got {self.multiplier}")
        if self.max_delay_s < self.initial_delay_s:
            raise ValueError(f"max_delay_s must be >= initial_delay_s ({self.initial_delay_s}), got {self.max_delay_s}")
        if self.reset_after_s <= 0:
            raise ValueError(f"reset_after_s must be > 0, got {self.reset_after_s}")

    def delay(self, attempt: int) -> float:
        """Seconds to wait before restart number `attempt` (1 = the first after a healthy run).

        Example::

            [RestartPolicy(0.5, 2, 30).delay(n) for n in (1, 2, 3, 10)]   # [0.5, 1.0, 2.0, 30.0]
        """
        if attempt < 1:
            raise ValueError(f"attempt must be >= 1, got {attempt}")
        # min() before the power would overflow: 2.0 ** 2000 is an OverflowError for floats.
        return min(self.max_delay_s, self.initial_delay_s * self.multiplier ** min(attempt - 1, 64))


def describe_exit(returncode: int) -> str:
    """A child's exit status in words, from `Popen.returncode` (negative = killed by that signal).

    Example::

        describe_exit(1), describe_exit(-9)   # ('exit code 1', 'killed by signal SIGKILL')
    """
    if returncode >= 0:
        return f"exit code {returncode}"
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        name = str(-returncode)
    return f"killed by signal {name}"


@dataclass(frozen=True)
class Restart:
    """The decision for one exit: start `child` again at `at` (clock time), `delay_s` from its exit."""

    child: str
    returncode: int
    uptime_s: float
    attempt: int
    delay_s: float
    at: float

    def describe(self) -> str:
        """One log line: which child, how it ended, when the next attempt comes."""
        return (f"{self.child} exited ({describe_exit(self.returncode)}) after {self.uptime_s:.1f} s up: "
                f"restart #{self.attempt} in {self.delay_s:.1f} s")


@dataclass
class _Child:
    started_at: float
    attempt: int = 0  # consecutive short-lived runs so far


@dataclass
class Supervisor:
    """Restart decisions for a set of named children (see the module docstring)."""

    policy: RestartPolicy = field(default_factory=RestartPolicy)
    clock: Callable[[], float] = time.monotonic
    _children: dict[str, _Child] = field(default_factory=dict, init=False, repr=False)
    _pending: dict[str, Restart] = field(default_factory=dict, init=False, repr=False)
    _stopping: bool = field(default=False, init=False, repr=False)

    def started(self, child: str) -> None:
        """`child` was (re)started now."""
        self._pending.pop(child, None)
        known = self._children.get(child)
        self._children[child] = _Child(self.clock(), known.attempt if known is not None else 0)

    def exited(self, child: str, returncode: int) -> Restart | None:
        """`child` exited with `returncode`: when to start it again (None once `stop` was called)."""
        now = self.clock()
        state = self._children.get(child)
        if state is None:
            raise ValueError(f"{child!r} exited but was never started")
        uptime = now - state.started_at
        if self._stopping:
            return None
        state.attempt = 1 if uptime >= self.policy.reset_after_s else state.attempt + 1
        delay = self.policy.delay(state.attempt)
        restart = Restart(child, returncode, uptime, state.attempt, delay, now + delay)
        self._pending[child] = restart
        return restart

    def due(self) -> list[str]:
        """The children whose restart time has come, in the order they exited. Each is due once: call
        `started` when it runs again."""
        now = self.clock()
        ready = [child for child, restart in self._pending.items() if restart.at <= now]
        for child in ready:
            del self._pending[child]
        return ready

    def waiting(self) -> dict[str, Restart]:
        """The restarts decided and not yet due, by child."""
        return dict(self._pending)

    def stop(self) -> None:
        """Shutting down: no exit from now on is restarted, and pending restarts are dropped."""
        self._stopping = True
        self._pending.clear()

    @property
    def stopping(self) -> bool:
        return self._stopping


__all__ = ["RestartPolicy", "Restart", "Supervisor", "describe_exit"]
