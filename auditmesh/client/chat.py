"""The chat helper: one `ModerateStream` call for a live chat, sending and receiving at once.

`AsyncChat.send` writes one message and returns its request id without waiting for the answer;
`receive` (or `async for reply in chat`) hands out answers, in send order (`ordered=True`) or as
they arrive. Each message has its own deadline (`deadline_ms`, sent to the router, which answers
DEADLINE_EXCEEDED for a message it could not judge in time; the chat also answers a message locally
once its deadline plus `grace_s` has passed without an answer). Flow control: at most `window`
messages are outstanding (sent and not yet received by the caller); `send` waits for room, so a
slow consumer slows the sender instead of growing memory. If the stream itself fails, every
outstanding message is answered with the stream's error and later sends raise it.

Example::

    async with client.chat(ordered=True, window=64) as chat:
        async def produce() -> None:
            for line in lines:
                await chat.send(line)
            await chat.done_sending()
        producer = asyncio.create_task(produce())
        async for reply in chat:
            print(reply.request_id, reply.verdict.decision if reply.ok else reply.error)
        await producer
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass
from typing import Any, AsyncIterator, Mapping, Sequence

import grpc
from auditmesh.v1 import moderation_pb2 as pb

from auditmesh.client.errors import ClientClosedError, ModerationError, from_rpc_error, from_status
from auditmesh.client.items import Item, Verdict, to_item, verdict_from
from auditmesh.client.window import ChatWindow

_chat_ids = itertools.count()


@dataclass(frozen=True)
class ChatReply:
    """The answer to one chat message: a verdict, or the error that message ended with."""

    request_id: str
    verdict: Verdict | None
    error: ModerationError | None

    def __post_init__(self) -> None:
        if (self.verdict is None) == (self.error is None):
            raise ValueError("a ChatReply has exactly one of verdict and error")

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def result(self) -> Verdict | ModerationError:
        """The verdict, or the error this message ended with."""
        if self.error is not None:
            return self.error
        if self.verdict is None:  # excluded by __post_init__
            raise RuntimeError("a ChatReply without verdict or error")
        return self.verdict


class AsyncChat:
    """One ModerateStream call (see the module docstring). Use as `async with client.chat() as chat`."""

    def __init__(self, stub: Any, metadata: Sequence[tuple[str, str]], *, policy: str = "", ordered: bool = True,
                 window: int = 64, deadline_ms: int = 2000, grace_s: float = 0.25,
                 stream_timeout_s: float | None = None) -> None:
        if deadline_ms < 1:
            raise ValueError(f"deadline_ms must be >= 1, got {deadline_ms}")
        if grace_s < 0:
            raise ValueError(f"grace_s must be >= 0, got {grace_s}")
        self._stub = stub
        self._metadata = tuple(metadata)
        self._policy = policy
        self._deadline_ms = deadline_ms
        self._grace_s = grace_s
        self._stream_timeout_s = stream_timeout_s
        self._window: ChatWindow[ChatReply] = ChatWindow(capacity=window, ordered=ordered)
        self._prefix = f"c{next(_chat_ids)}-"
        self._sequence = itertools.count()
        self._call: Any = None
        self._reader: asyncio.Task[None] | None = None
        self._changed = asyncio.Condition()
        self._write_lock = asyncio.Lock()
        self._timer: asyncio.TimerHandle | None = None
        self._failure: ModerationError | None = None
        self._sending_done = False

    async def __aenter__(self) -> AsyncChat:
        self._call = self._stub.ModerateStream(metadata=self._metadata, timeout=self._stream_timeout_s)
        self._reader = asyncio.create_task(self._read_all())
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def send(self, text: str | None = None, *, images: Sequence[bytes] = (), metadata: Mapping[str, str] | None = None,
                   item_id: str = "", request_id: str = "", deadline_ms: int | None = None) -> str:
        """Send one message (waiting while the window is full) and return its request id (generated
        unless given; ids must be unique among outstanding messages). Raises the stream's
        ModerationError once the stream has failed, ClientClosedError after `done_sending`/`close`."""
        item = to_item(Item(text=text, images=images, metadata=metadata or {}, id=item_id))
        rid = request_id or f"{self._prefix}{next(self._sequence)}"
        budget_ms = deadline_ms or self._deadline_ms
        async with self._changed:
            await self._changed.wait_for(lambda: self._window.has_room or self._failure is not None or self._sending_done)
            self._check_open()
            loop = asyncio.get_running_loop()
            self._window.open(rid, deadline=loop.time() + budget_ms / 1000 + self._grace_s)
            self._arm()
        request = pb.ModerateRequest(request_id=rid, item=item, policy=self._policy, deadline_ms=budget_ms)
        try:
            async with self._write_lock:
                await self._call.write(request)
        except (grpc.aio.AioRpcError, grpc.aio.UsageError, asyncio.InvalidStateError) as error:
            await self._stream_failed(error)
            raise self._failure or ClientClosedError("chat") from error
        return rid

    async def receive(self) -> ChatReply:
        """The next answer (ordered or in arrival order); raises StopAsyncIteration when sending is
        done and every message has been answered."""
        async with self._changed:
            while True:
                ready = self._window.take(1)
                if ready:
                    self._changed.notify_all()  # room for a waiting sender
                    return ready[0][1]
                if not len(self._window) and (self._sending_done or self._failure is not None):
                    raise StopAsyncIteration
                await self._changed.wait()

    def __aiter__(self) -> AsyncIterator[ChatReply]:
        return self

    async def __anext__(self) -> ChatReply:
        return await self.receive()

    async def done_sending(self) -> None:
        """No more messages: half-close the stream; answers to those sent still arrive."""
        async with self._changed:
            if self._sending_done:
                return
            self._sending_done = True
            self._changed.notify_all()
        if self._failure is None:
            async with self._write_lock:
                try:
                    await self._call.done_writing()
                except (grpc.aio.AioRpcError, grpc.aio.UsageError, asyncio.InvalidStateError):
                    pass  # the stream already ended: the reader reports why

    async def close(self) -> None:
        """Stop sending, and end the stream once every outstanding message is answered (or past its
        deadline). Answers not received by then are dropped."""
        await self.done_sending()
        if self._reader is not None:
            async with self._changed:
                await self._changed.wait_for(lambda: not self._window.unanswered)
            self._reader.cancel()
            await asyncio.gather(self._reader, return_exceptions=True)
        if self._call is not None:
            self._call.cancel()
        if self._timer is not None:
            self._timer.cancel()

    # -- receiving ----------------------------------------------------------------------------------
    async def _read_all(self) -> None:
        try:
            while True:
                response = await self._call.read()
                if response is grpc.aio.EOF:
                    break
                await self._answered(response)
        except grpc.aio.AioRpcError as error:
            await self._stream_failed(error)
            return
        # The server ended the stream: anything still unanswered will never be.
        await self._stream_failed(None)

    async def _answered(self, response: Any) -> None:
        rid = response.request_id
        if response.HasField("error"):
            reply = ChatReply(rid, None, from_status(response.error, response.item_id))
        else:
            reply = ChatReply(rid, verdict_from(response), None)
        async with self._changed:
            if self._window.answer(rid, reply):
                self._changed.notify_all()

    async def _stream_failed(self, error: BaseException | None) -> None:
        failure = (from_rpc_error(error) if isinstance(error, grpc.RpcError)
                   else ModerationError(grpc.StatusCode.UNAVAILABLE, "the stream ended before answering this message"))
        async with self._changed:
            if self._failure is None:
                self._failure = failure
            for rid in self._window.unanswered_ids():
                self._window.answer(rid, ChatReply(rid, None, self._failure))
            self._changed.notify_all()

    def _check_open(self) -> None:
        if self._failure is not None:
            raise self._failure
        if self._sending_done:
            raise ClientClosedError("chat")

    # -- local deadlines ----------------------------------------------------------------------------
    def _arm(self) -> None:
        deadline = self._window.next_deadline()
        if self._timer is not None:
            if deadline is not None and self._timer.when() <= deadline:
                return
            self._timer.cancel()
            self._timer = None
        if deadline is not None:
            self._timer = asyncio.get_running_loop().call_at(deadline, self._on_deadline)

    def _on_deadline(self) -> None:
        self._timer = None
        asyncio.ensure_future(self._expire())

    async def _expire(self) -> None:
        async with self._changed:
            now = asyncio.get_running_loop().time()
            for rid in self._window.overdue(now):
                self._window.answer(rid, ChatReply(rid, None, ModerationError(
                    grpc.StatusCode.DEADLINE_EXCEEDED, "no answer on the stream before the message's deadline")))
            self._arm()
            self._changed.notify_all()


__all__ = ["AsyncChat", "ChatReply"]
