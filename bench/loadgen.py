"""Open-loop load generation: Poisson arrivals sent at their scheduled times, whatever the replies do.

A closed-loop client (send, wait, send again) slows down when the server slows down, so it never
sees the queueing it causes ("coordinated omission"). Here every request has a scheduled send time
drawn in advance from a Poisson process; the generator sends each one at that time without waiting
for earlier replies, and latency is measured from the *scheduled* time. If the generator itself
falls behind (an overloaded event loop, a busy core) the lag is counted in the latency and also
reported on its own (`Outcome.lag_s`), so a slow generator cannot hide a slow server.

Example::

    arrivals = poisson_arrivals(200.0, 5.0, kinds={"text": 1.0}, tenants={"chat": 1.0}, seed=1)
    outcomes = await run_open_loop(sender, arrivals)   # sender: async (Arrival) -> status name
    summarize_ms(o.latency_s for o in outcomes)
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass
from typing import Callable, Mapping, Protocol, Sequence

#: Status recorded when a sender raised instead of returning a status: a harness bug, never the server's.
CLIENT_ERROR_PREFIX = "CLIENT_ERROR:"


@dataclass(frozen=True)
class Arrival:
    """One planned request: when (seconds after the start), what kind of item, which tenant, which input."""

    at_s: float
    kind: str
    tenant: str
    index: int


@dataclass(frozen=True)
class Outcome:
    """What happened to one arrival. Times are absolute readings of the generator's clock."""

    arrival: Arrival
    scheduled: float
    sent: float
    done: float
    code: str

    @property
    def latency_s(self) -> float:
        """From the scheduled send time to the answer: what the user waited (no coordinated omission)."""
        return self.done - self.scheduled

    @property
    def service_s(self) -> float:
        """From the actual send to the answer: what the server took."""
        return self.done - self.sent

    @property
    def lag_s(self) -> float:
        """How late the generator sent it."""
        return self.sent - self.scheduled

    @property
    def ok(self) -> bool:
        return self.code == "OK"


class Sender(Protocol):
    """Sends one arrival and returns the gRPC status name of the answer ("OK", "DEADLINE_EXCEEDED", ...).

    Implementations map their RPC errors to status names themselves; anything they raise is recorded
    as `CLIENT_ERROR:<ExceptionType>`.
    """

    async def __call__(self, arrival: Arrival) -> str: ...


def _pick(rng: random.Random, weights: Mapping[str, float]) -> str:
    names = list(weights)
    return rng.choices(names, weights=[weights[n] for n in names])[0]


def poisson_arrivals(rate_rps: float, duration_s: float, *, kinds: Mapping[str, float], tenants: Mapping[str, float],
                     seed: int = 0, inputs_per_kind: int = 1 << 16) -> list[Arrival]:
    """Arrival times of a Poisson process of `rate_rps` over `duration_s`, each with a kind and a
    tenant drawn from the given weights and an input index in [0, inputs_per_kind).

    Deterministic for a given seed. Raises ValueError for a non-positive rate or duration or empty weights.

    Example::

        >>> [round(a.at_s, 3) for a in poisson_arrivals(2.0, 2.0, kinds={"text": 1}, tenants={"t": 1}, seed=3)]
        [0.136, 0.627, 0.777, 1.167, 1.299, 1.975]
    """
    if rate_rps <= 0 or duration_s <= 0:
        raise ValueError(f"rate_rps and duration_s must be > 0, got {rate_rps} and {duration_s}")
    if not kinds or not tenants:
        raise ValueError("kinds and tenants need at least one entry each")
    rng = random.Random(seed)
    arrivals: list[Arrival] = []
    at = rng.expovariate(rate_rps)
    while at < duration_s:
        arrivals.append(Arrival(at, _pick(rng, kinds), _pick(rng, tenants), rng.randrange(inputs_per_kind)))
        at += rng.expovariate(rate_rps)
    return arrivals


async def _send_one(send: Sender, arrival: Arrival, scheduled: float, clock: Callable[[], float]) -> Outcome:
    sent = clock()
    try:
        code = await send(arrival)
    except asyncio.CancelledError:
        raise
    except Exception as error:  # a harness bug must show up in the report, not stop the run
        code = f"{CLIENT_ERROR_PREFIX}{type(error).__name__}"
    return Outcome(arrival, scheduled, sent, clock(), code)


async def run_open_loop(send: Sender, arrivals: Sequence[Arrival], *, clock: Callable[[], float] = time.perf_counter,
                        lead_s: float = 0.01) -> list[Outcome]:
    """Send every arrival at `start + arrival.at_s` (start = now + `lead_s`), never waiting for replies
    before the next send; return when every reply is in, outcomes in arrival order."""
    start = clock() + lead_s
    tasks: list[asyncio.Task[Outcome]] = []
    for arrival in sorted(arrivals, key=lambda a: a.at_s):
        scheduled = start + arrival.at_s
        # sleep(0) when behind still yields, so started calls make progress while we catch up.
        await asyncio.sleep(max(0.0, scheduled - clock()))
        tasks.append(asyncio.create_task(_send_one(send, arrival, scheduled, clock)))
    return list(await asyncio.gather(*tasks))
