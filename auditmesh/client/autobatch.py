"""Auto-batching, the asyncio driver: concurrent single-item calls share one batch call.

Each `submit` gets its own future. Items wait in a `BatchAccumulator` (pure) until their key's batch
is full or the oldest waited `linger_s` (or, with `send_when_idle`, at once while no batch call is in
flight: then items submitted in the same event-loop turn still go together, and those arriving while
a call is in flight linger for the next); then one `send(key, items, timeout_s)` call carries them and
every caller gets its own result or error. An item refused with a retryable error
(`RetryPolicy`) goes back into the accumulator after the policy's delay and joins a later batch; a
whole batch refused with RESOURCE_EXHAUSTED is split (`BatchLimit`) and its items sent again in
smaller batches. Every item has a deadline: unanswered by then, its caller gets DEADLINE_EXCEEDED
and a late answer is dropped.

No gRPC here: the `send` function is injected (the client's ModerateBatch call), so this is tested
with fakes. `close()` sends what waits and returns when every accepted item is settled.

Example::

    batcher = AutoBatcher(send_batch, linger_s=0.005, max_items=64, retry=RetryPolicy())
    verdict = await batcher.submit("default", item, deadline=loop.time() + 2.0)
    await batcher.close()
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, Sequence, TypeVar

import grpc

from auditmesh.client.batching import BatchAccumulator, BatchLimit
from auditmesh.client.errors import BatchShapeError, ClientClosedError, ModerationError
from auditmesh.client.retry import RetryPolicy

R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)


class BatchSend(Protocol[R_co]):
    """Sends `items` (all with the same `key`) in one call with a `timeout_s` deadline; returns one
    result or ModerationError per item, in order; raises ModerationError when the call fails as a whole."""

    async def __call__(self, key: str, items: Sequence[Any], timeout_s: float, /) -> Sequence[R_co | ModerationError]: ...


@dataclass
class _Bound(Generic[R]):
    """What exists once the batcher knows its event loop."""

    loop: asyncio.AbstractEventLoop
    queue: BatchAccumulator[_Entry[R]]
    idle: asyncio.Event


@dataclass(eq=False)
class _Entry(Generic[R]):
    key: str
    item: Any
    deadline: float
    future: asyncio.Future[R]
    attempts: int = 0
    timers: list[asyncio.TimerHandle] = field(default_factory=list)


class AutoBatcher(Generic[R]):
    """See the module docstring. Bound to the event loop it is first used in."""

    def __init__(self, send: BatchSend[R], *, linger_s: float, max_items: int, retry: RetryPolicy,
                 send_when_idle: bool = True, rng: random.Random | None = None) -> None:
        self._send = send
        self._send_when_idle = send_when_idle
        self._in_flight = 0
        self._retry = retry
        self._rng = rng or random.Random()
        self.limit = BatchLimit(max_items)
        self._linger_s = linger_s
        self._bound: _Bound[R] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._unsettled = 0
        self._closing = False
        #: Batch calls sent, and items in them (retries included): what auto-batching saved.
        self.calls_sent = 0
        self.items_sent = 0

    @property
    def _state(self) -> _Bound[R]:
        if self._bound is None:
            loop = asyncio.get_running_loop()
            self._bound = _Bound(loop, BatchAccumulator(linger_s=self._linger_s, limit=self.limit, clock=loop.time),
                                 asyncio.Event())
            self._bound.idle.set()
        return self._bound

    async def submit(self, key: str, item: Any, *, deadline: float) -> R:
        """Queue `item` for a batch of `key`; its result, or the ModerationError it ended with.
        `deadline` is in the event loop's clock (`loop.time()`)."""
        if self._closing:
            raise ClientClosedError()
        state = self._state
        loop = state.loop
        entry: _Entry[R] = _Entry(key, item, deadline, loop.create_future())
        entry.timers.append(loop.call_at(deadline, self._expire, entry))
        entry.future.add_done_callback(lambda _: self._settled(entry))
        self._unsettled += 1
        state.idle.clear()
        self._enqueue(entry)
        return await entry.future

    async def close(self) -> None:
        """Send everything that waits now and return once every accepted item is settled (answered,
        failed, or past its deadline). Later `submit` calls raise ClientClosedError."""
        self._closing = True
        if self._bound is None:
            return
        self._flush(self._bound.queue.drain())
        await self._bound.idle.wait()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    # -- queueing -----------------------------------------------------------------------------------
    def _enqueue(self, entry: _Entry[R]) -> None:
        if entry.future.done():
            return
        queue = self._state.queue
        full = queue.add(entry.key, entry)
        if full is not None:
            self._dispatch(entry.key, full)
        if self._closing:
            self._flush(queue.drain())
        self._arm()

    def _arm(self) -> None:
        """Keep one timer, at the time the earliest waiting batch is due."""
        state = self._state
        due = state.queue.next_due(idle=self._idle_now)
        if due is None:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            return
        if self._timer is not None and self._timer.when() <= due:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer = state.loop.call_at(due, self._on_timer)

    @property
    def _idle_now(self) -> bool:
        return self._send_when_idle and self._in_flight == 0

    def _on_timer(self) -> None:
        self._timer = None
        self._flush(self._state.queue.due(idle=self._idle_now))
        self._arm()

    def _flush(self, batches: list[tuple[str, list[_Entry[R]]]]) -> None:
        for key, entries in batches:
            self._dispatch(key, entries)

    def _dispatch(self, key: str, entries: list[_Entry[R]]) -> None:
        live = [entry for entry in entries if not entry.future.done()]  # drop cancelled and expired items
        if not live:
            return
        loop = self._state.loop
        timeout = max(entry.deadline for entry in live) - loop.time()
        task = loop.create_task(self._run(key, live, max(timeout, 0.001)))
        self._in_flight += 1
        self._tasks.add(task)
        task.add_done_callback(self._call_done)

    def _call_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        self._in_flight -= 1
        if self._in_flight == 0 and self._bound is not None:
            self._arm()  # idle again: what lingers may go now

    # -- one batch call -----------------------------------------------------------------------------
    async def _run(self, key: str, entries: list[_Entry[R]], timeout_s: float) -> None:
        for entry in entries:
            entry.attempts += 1
        self.calls_sent += 1
        self.items_sent += len(entries)
        try:
            results = await self._send(key, [entry.item for entry in entries], timeout_s)
        except ModerationError as error:
            self._call_failed(entries, error)
            return
        except asyncio.CancelledError:
            for entry in entries:
                self._fail(entry, ClientClosedError())
            raise
        except Exception as error:  # a bug in `send`: every caller must hear of it, not wait forever
            for entry in entries:
                _set_exception(entry.future, error)
            return
        self.limit.accepted()
        if len(results) != len(entries):
            for entry in entries:
                self._fail(entry, BatchShapeError(len(entries), len(results)))
            return
        for entry, result in zip(entries, results):
            if isinstance(result, ModerationError):
                self._retry_or_fail(entry, result)
            elif not entry.future.done():
                entry.future.set_result(result)

    def _call_failed(self, entries: list[_Entry[R]], error: ModerationError) -> None:
        if error.code is grpc.StatusCode.RESOURCE_EXHAUSTED and len(entries) > 1:
            # Refused whole (a burst or size limit below the batch): split it. Not counted as an
            # attempt of these items: the split is ours, and it ends at batches of one.
            self.limit.refused(len(entries))
            for entry in entries:
                entry.attempts -= 1
                self._later(entry, error.retry_after_s or 0.0)
            return
        for entry in entries:
            self._retry_or_fail(entry, error)

    def _retry_or_fail(self, entry: _Entry[R], error: ModerationError) -> None:
        if entry.future.done():
            return
        now = self._state.loop.time()
        delay = self._retry.delay_s(entry.attempts, error.code.name, error.message, error.retry_after_s,
                                    remaining_s=entry.deadline - now, rng=self._rng)
        if delay is None:
            self._fail(entry, error.with_attempts(entry.attempts))
        else:
            self._later(entry, delay)

    def _later(self, entry: _Entry[R], delay_s: float) -> None:
        if delay_s <= 0:
            self._enqueue(entry)
        else:
            entry.timers.append(self._state.loop.call_later(delay_s, self._enqueue, entry))

    # -- settling -----------------------------------------------------------------------------------
    def _fail(self, entry: _Entry[R], error: ModerationError) -> None:
        _set_exception(entry.future, error)

    def _expire(self, entry: _Entry[R]) -> None:
        self._fail(entry, ModerationError(grpc.StatusCode.DEADLINE_EXCEEDED,
                                          f"no answer before the deadline (sent {entry.attempts} time(s))",
                                          attempts=entry.attempts))

    def _settled(self, entry: _Entry[R]) -> None:
        for timer in entry.timers:
            timer.cancel()
        entry.timers.clear()
        self._unsettled -= 1
        if self._unsettled == 0 and self._bound is not None:
            self._bound.idle.set()


def _set_exception(future: asyncio.Future[Any], error: BaseException) -> None:
    if not future.done():
        future.set_exception(error)


__all__ = ["AutoBatcher", "BatchSend"]
