"""The open-loop generator: sends on schedule whatever the replies do; latency counts from the schedule."""

from __future__ import annotations

import asyncio

import pytest

from bench.loadgen import CLIENT_ERROR_PREFIX, Arrival, poisson_arrivals, run_open_loop


def test_poisson_arrivals_are_deterministic_sorted_and_near_the_rate() -> None:
    first = poisson_arrivals(1000.0, 2.0, kinds={"text": 0.9, "image": 0.1}, tenants={"a": 1, "b": 1}, seed=5)
    again = poisson_arrivals(1000.0, 2.0, kinds={"text": 0.9, "image": 0.1}, tenants={"a": 1, "b": 1}, seed=5)
    assert first == again
    assert [a.at_s for a in first] == sorted(a.at_s for a in first) and all(0 <= a.at_s < 2.0 for a in first)
    assert 1800 < len(first) < 2200  # Poisson(2000): 4.5 standard deviations either side
    assert 0.05 < sum(a.kind == "image" for a in first) / len(first) < 0.15
    assert {a.tenant for a in first} == {"a", "b"}


@pytest.mark.parametrize("rate, duration", [(0.0, 1.0), (1.0, 0.0), (-1.0, 1.0)])
def test_poisson_arrivals_reject_non_positive_rate_or_duration(rate: float, duration: float) -> None:
    with pytest.raises(ValueError, match="must be > 0"):
        poisson_arrivals(rate, duration, kinds={"text": 1}, tenants={"a": 1})


async def test_every_request_is_sent_before_any_reply_arrives() -> None:
    # A closed-loop generator would wait for the first reply and never send the rest: wait_for fails.
    arrivals = [Arrival(i * 0.001, "text", "a", i) for i in range(5)]
    release = asyncio.Event()
    sent: list[int] = []

    async def held_until_all_sent(arrival: Arrival) -> str:
        sent.append(arrival.index)
        if len(sent) == len(arrivals):
            release.set()
        await release.wait()
        return "OK"

    outcomes = await asyncio.wait_for(run_open_loop(held_until_all_sent, arrivals), timeout=10.0)
    assert sorted(sent) == list(range(5)) and all(o.ok for o in outcomes)
    assert all(o.latency_s >= o.service_s and o.lag_s >= 0 for o in outcomes)


async def test_latency_counts_from_the_scheduled_time_when_the_generator_is_late() -> None:
    # Fake clock: the first call blocks the generator for 2 s (as a synchronous client would); the
    # next arrivals go out late, and their latency includes that wait (no coordinated omission).
    now = [0.0]

    async def blocking(arrival: Arrival) -> str:
        if arrival.index == 0:
            now[0] += 2.0
        return "OK"

    arrivals = [Arrival(0.0, "text", "a", 0), Arrival(0.5, "text", "a", 1), Arrival(1.0, "text", "a", 2)]
    outcomes = await run_open_loop(blocking, arrivals, clock=lambda: now[0], lead_s=0.0)
    assert [round(o.latency_s, 6) for o in outcomes] == [2.0, 1.5, 1.0]
    assert [round(o.service_s, 6) for o in outcomes] == [2.0, 0.0, 0.0]
    assert [round(o.lag_s, 6) for o in outcomes] == [0.0, 1.5, 1.0]


async def test_a_sender_that_raises_is_recorded_as_a_client_error() -> None:
    async def broken(arrival: Arrival) -> str:
        raise KeyError(arrival.tenant)

    [outcome] = await run_open_loop(broken, [Arrival(0.0, "text", "nobody", 0)])
    assert outcome.code == f"{CLIENT_ERROR_PREFIX}KeyError" and not outcome.ok
