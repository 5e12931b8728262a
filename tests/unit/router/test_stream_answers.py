"""services/router/stream_answers.py: every message read is answered; a stream that can no longer be
read ends with StreamReadError after those answers, and nothing is left running (issue 12 item 3)."""

from __future__ import annotations

import asyncio
from typing import AsyncIterator

import pytest

from services.router.stream_answers import StreamReadError, answer_stream


class Broken(Exception):
    pass


async def requests(values: list[int], *, then_fail: bool = False) -> AsyncIterator[int]:
    for value in values:
        yield value
    if then_fail:
        raise Broken("transport gone")


async def test_answers_every_request_then_ends() -> None:
    async def double(value: int) -> int:
        await asyncio.sleep(0.001 * (5 - value))
        return value * 2

    answers = [a async for a in answer_stream(requests([1, 2, 3, 4]), double, max_in_flight=2)]
    assert sorted(answers) == [2, 4, 6, 8]


async def test_a_stream_that_cannot_be_read_keeps_the_accepted_answers_then_fails_and_releases_everything() -> None:
    gate = asyncio.Event()
    started: list[int] = []

    async def slow(value: int) -> int:
        started.append(value)
        await gate.wait()
        return value

    answers: list[int] = []
    before = len(asyncio.all_tasks())

    async def consume() -> None:
        async for answer in answer_stream(requests([1, 2, 3], then_fail=True), slow, max_in_flight=8):
            answers.append(answer)

    consumer = asyncio.create_task(consume())
    while len(started) < 3:
        await asyncio.sleep(0)
    gate.set()
    with pytest.raises(StreamReadError) as raised:
        await consumer
    assert sorted(answers) == [1, 2, 3]
    assert "after 3 messages" in str(raised.value) and isinstance(raised.value.__cause__, Broken)
    assert len(asyncio.all_tasks()) == before


async def test_closing_the_answers_cancels_pending_work() -> None:
    started: list[int] = []
    cancelled: list[int] = []

    async def forever(value: int) -> int:
        started.append(value)
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(value)
            raise
        return value

    async def endless() -> AsyncIterator[int]:
        yield 1
        yield 2
        await asyncio.Event().wait()
        yield 3

    stream = answer_stream(endless(), forever, max_in_flight=4)
    async def next_answer() -> int:
        return await anext(stream)

    waiting = asyncio.create_task(next_answer())  # as the call does: waiting for the next answer
    while len(started) < 2:
        await asyncio.sleep(0)
    waiting.cancel()  # the client went away
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert sorted(cancelled) == [1, 2]


async def test_at_most_max_in_flight_are_answered_at_once_and_reading_waits() -> None:
    gate = asyncio.Event()
    running: list[int] = []
    most = 0
    read: list[int] = []

    async def counted(values: list[int]) -> AsyncIterator[int]:
        for value in values:
            read.append(value)
            yield value

    async def slow(value: int) -> int:
        nonlocal most
        running.append(value)
        most = max(most, len(running))
        await gate.wait()
        running.remove(value)
        return value

    async def consume() -> list[int]:
        return [a async for a in answer_stream(counted(list(range(10))), slow, max_in_flight=3)]

    consumer = asyncio.create_task(consume())
    for _ in range(50):
        await asyncio.sleep(0)
    assert len(running) == 3 and len(read) <= 4  # the reader holds one message while waiting for a slot
    gate.set()
    assert sorted(await consumer) == list(range(10))
    assert most == 3


async def test_answers_come_in_completion_order() -> None:
    gates = {value: asyncio.Event() for value in range(3)}

    async def gated(value: int) -> int:
        await gates[value].wait()
        return value

    answers: list[int] = []

    async def consume() -> None:
        async for answer in answer_stream(requests([0, 1, 2]), gated, max_in_flight=8):
            answers.append(answer)

    consumer = asyncio.create_task(consume())
    for value in (2, 0, 1):
        gates[value].set()
        while len(answers) < [2, 0, 1].index(value) + 1:
            await asyncio.sleep(0)
    await consumer
    assert answers == [2, 0, 1]


async def test_a_failing_answer_ends_the_stream_after_the_other_answers() -> None:
    async def fragile(value: int) -> int:
        if value == 2:
            raise KeyError("bug")
        await asyncio.sleep(0.001)
        return value

    answers: list[int] = []
    with pytest.raises(KeyError):
        async for answer in answer_stream(requests([1, 2, 3]), fragile, max_in_flight=8):
            answers.append(answer)
    assert sorted(answers) == [1, 3]


async def test_answers_nobody_takes_stop_the_reading() -> None:
    read: list[int] = []

    async def counted() -> AsyncIterator[int]:
        for value in range(100):
            read.append(value)
            yield value

    async def quick(value: int) -> int:
        return value

    stream = answer_stream(counted(), quick, max_in_flight=4)
    first = await anext(stream)  # then the consumer stops taking answers (a slow client)
    for _ in range(50):
        await asyncio.sleep(0)
    assert len(read) <= 4 + 2  # the window, the one taken, and the one the reader holds
    rest = [answer async for answer in stream]
    assert sorted([first, *rest]) == list(range(100))
