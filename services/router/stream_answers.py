"""Answering a request stream: read messages, answer each concurrently, yield answers as they finish.
Pure asyncio, no gRPC.

* At most `max_in_flight` messages are being answered at once; reading pauses beyond that
  (backpressure towards the client instead of an unbounded task list).
* Every message that was read gets its answer, even when reading then fails.
* When the requests end, the answers still pending are awaited and yielded, then the stream ends.
* When reading raises (the stream can no longer be read), the pending answers are still yielded and
  then `StreamReadError` is raised, so the caller ends the call with a clear status; nothing is left
  running. Closing the answer stream early (the call was cancelled) cancels the reader and every
  pending answer.

Example::

    async for response in answer_stream(request_iterator, handle, max_in_flight=256):
        yield response
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import AsyncIterator, Awaitable, Callable, Generic, TypeVar

from services.common.errors import UnavailableError

Q = TypeVar("Q")
A = TypeVar("A")


class StreamReadError(UnavailableError):
    """The request stream could not be read any further (the answers to what was read were sent)."""


@dataclass(frozen=True)
class _End(Generic[A]):
    error: BaseException | None
    read: int


async def answer_stream(requests: AsyncIterator[Q], answer: Callable[[Q], Awaitable[A]], *,
                        max_in_flight: int) -> AsyncIterator[A]:
    """Yield `answer(request)` for every request, in completion order (see the module docstring).
    `answer` should not raise; if it does, the error ends the stream after the other answers."""
    if max_in_flight < 1:
        raise ValueError(f"max_in_flight must be >= 1, got {max_in_flight}")
    results: asyncio.Queue[A | _End[A]] = asyncio.Queue()
    slots = asyncio.Semaphore(max_in_flight)
    pending: set[asyncio.Task[None]] = set()
    failures: list[BaseException] = []

    async def run(request: Q) -> None:
        try:
            await results.put(await answer(request))
        except asyncio.CancelledError:
            raise
        except Exception as error:  # a bug in `answer`: kept, raised once the others are out
            failures.append(error)
        finally:
            slots.release()

    async def read() -> None:
        count, error = 0, None
        try:
            async for request in requests:
                await slots.acquire()
                count += 1
                task = asyncio.get_running_loop().create_task(run(request))
                pending.add(task)
                task.add_done_callback(pending.discard)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            error = exc
        if pending:  # accepted messages keep their answers
            await asyncio.gather(*pending, return_exceptions=True)
        await results.put(_End(error, count))

    reader = asyncio.get_running_loop().create_task(read())
    try:
        while not isinstance(item := await results.get(), _End):
            yield item
        if failures:
            raise failures[0]
        if item.error is not None:
            raise StreamReadError(f"the request stream could not be read after {item.read} messages "
                                  f"({type(item.error).__name__}); the answers to those were sent. "
                                  "Open a new stream.") from item.error
    finally:
        reader.cancel()
        for task in list(pending):
            task.cancel()
        await asyncio.gather(reader, *pending, return_exceptions=True)


__all__ = ["StreamReadError", "answer_stream"]
