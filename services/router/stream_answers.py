"""Answering a request stream: read messages, answer each concurrently, yield answers as they finish.
Pure asyncio, no gRPC.

* At most `max_in_flight` messages are being answered or waiting to be sent at once; reading pauses
  beyond that (backpressure towards the client: a client that does not read its answers stops
  being read, instead of the answers piling up).
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
from collections import deque
from typing import Any, AsyncIterator, Callable, Coroutine, Generic, TypeVar

from services.common.errors import UnavailableError

Q = TypeVar("Q")
A = TypeVar("A")


class StreamReadError(UnavailableError):
    """The request stream could not be read any further (the answers to what was read were sent)."""


class _Answering(Generic[Q, A]):
    """The shared state of one stream. Per message: one task and one done-callback, nothing else
    (no semaphore, queue or wrapper coroutine: a stream message should cost no more than a batch item)."""

    def __init__(self, answer: Callable[[Q], Coroutine[Any, Any, A]], max_in_flight: int) -> None:
        self.answer = answer
        self.max_in_flight = max_in_flight
        self.loop = asyncio.get_running_loop()
        self.ready: deque[A] = deque()
        self.pending: set[asyncio.Task[A]] = set()
        self.failures: list[BaseException] = []
        self.read = 0
        self.ended = False
        self.read_error: BaseException | None = None
        self._consumer: asyncio.Future[None] | None = None  # the answer side, waiting for something to yield
        self._reader: asyncio.Future[None] | None = None  # the reader, waiting for a free slot

    def start(self, request: Q) -> None:
        self.read += 1
        task = self.loop.create_task(self.answer(request))
        self.pending.add(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[A]) -> None:
        self.pending.discard(task)
        if not task.cancelled():
            error = task.exception()
            if error is None:
                self.ready.append(task.result())  # still held: its slot frees when the consumer takes it
                _wake(self._consumer)
                return
            if isinstance(error, Exception):  # a bug in `answer`: kept, raised once the others are out
                self.failures.append(error)
        self.taken()  # nothing to send for it: its slot is free now
        _wake(self._consumer)

    def held(self) -> int:
        """Messages being answered plus answers not yet taken by the consumer."""
        return len(self.pending) + len(self.ready)

    async def slot(self) -> None:
        """Wait until fewer than `max_in_flight` messages are held (`held`)."""
        while self.held() >= self.max_in_flight:
            self._reader = self.loop.create_future()
            await self._reader

    def taken(self) -> None:
        """The consumer took an answer: a slot may be free for the reader."""
        if self._reader is not None:
            _wake(self._reader)
            self._reader = None

    def end(self, error: BaseException | None) -> None:
        self.ended, self.read_error = True, error
        _wake(self._consumer)

    async def settled(self) -> None:
        """Wait until an answer is ready or everything is over."""
        if self.ready or (self.ended and not self.pending):
            return
        self._consumer = self.loop.create_future()
        await self._consumer


def _wake(waiter: asyncio.Future[None] | None) -> None:
    if waiter is not None and not waiter.done():
        waiter.set_result(None)


async def answer_stream(requests: AsyncIterator[Q], answer: Callable[[Q], Coroutine[Any, Any, A]], *,
                        max_in_flight: int) -> AsyncIterator[A]:
    """Yield `answer(request)` for every request, in completion order (see the module docstring).
    `answer` should not raise; if it does, the error ends the stream after the other answers."""
    if max_in_flight < 1:
        raise ValueError(f"max_in_flight must be >= 1, got {max_in_flight}")
    state: _Answering[Q, A] = _Answering(answer, max_in_flight)

    async def read() -> None:
        error = None
        try:
            async for request in requests:
                if state.held() >= max_in_flight:
                    await state.slot()
                state.start(request)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            error = exc
        state.end(error)

    reader = state.loop.create_task(read())
    try:
        while True:
            await state.settled()
            ready = state.ready
            while ready:
                yield ready.popleft()
                state.taken()
            if state.ended and not state.pending:
                break
        if state.failures:
            raise state.failures[0]
        if state.read_error is not None:
            raise StreamReadError(f"the request stream could not be read after {state.read} messages "
                                  f"({type(state.read_error).__name__}); the answers to those were sent. "
                                  "Open a new stream.") from state.read_error
    finally:
        reader.cancel()
        for task in list(state.pending):
            task.cancel()
        await asyncio.gather(reader, *state.pending, return_exceptions=True)


__all__ = ["StreamReadError", "answer_stream"]
