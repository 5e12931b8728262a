"""`Client`: the same client for code without asyncio (threads, scripts, WSGI apps).

It runs an `AsyncClient` on an event loop in a background thread and waits for each call, so
auto-batching works across threads: single-item `moderate` calls made concurrently from many threads
share ModerateBatch calls exactly as concurrent coroutines do.

Example::

    with Client(["127.0.0.1:8100"], api_key="...") as client:
        verdict = client.moderate(text="hello")
        with client.chat(ordered=False) as chat:
            chat.send("gg")
            reply = chat.receive(timeout_s=2)
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from typing import Any, Coroutine, Iterable, Iterator, Mapping, Sequence, TypeVar

import grpc

from auditmesh.client.aio import AsyncClient
from auditmesh.client.chat import AsyncChat, ChatReply
from auditmesh.client.errors import ModerationError
from auditmesh.client.items import Item, Verdict
from auditmesh.client.retry import RetryPolicy
from auditmesh.client.settings import DEFAULT_CHANNEL_OPTIONS, ClientConfig, ClientTls

T = TypeVar("T")


class _LoopThread:
    """An event loop running in a daemon thread; `run` waits for a coroutine on it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="auditmesh-client-loop", daemon=True)
        self._thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
        future = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        try:
            return future.result(timeout_s)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError(f"no result within {timeout_s} s") from None

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()


class Client:
    """Blocking client; same arguments and behaviour as `AsyncClient` (see there). Thread-safe."""

    def __init__(self, addresses: str | Sequence[str] = ("127.0.0.1:8100",), *, api_key: str | None = None,
                 timeout_s: float = 2.0, linger_ms: float = 5.0, max_batch_items: int = 64, batching: bool = True,
                 send_when_idle: bool = True, retry: RetryPolicy | None = None,
                 channel_options: Sequence[tuple[str, int | str]] = DEFAULT_CHANNEL_OPTIONS,
                 config: ClientConfig | None = None, interceptors: Sequence[grpc.aio.ClientInterceptor] = (),
                 tls: ClientTls | None = None) -> None:
        # Built (and so validated) before the loop thread starts.
        self._client = AsyncClient(addresses, api_key=api_key, timeout_s=timeout_s, linger_ms=linger_ms,
                                   max_batch_items=max_batch_items, batching=batching,
                                   send_when_idle=send_when_idle, retry=retry,
                                   channel_options=channel_options, config=config, interceptors=interceptors, tls=tls)
        self.config = self._client.config
        self._loop = _LoopThread()
        self._closed = False

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def batch_calls(self) -> int:
        """ModerateBatch calls sent so far (see AsyncClient.batch_calls)."""
        return self._client.batch_calls

    def moderate(self, text: str | None = None, *, images: Sequence[bytes] = (), policy: str = "",
                 metadata: Mapping[str, str] | None = None, item_id: str = "", timeout_s: float | None = None) -> Verdict:
        """See AsyncClient.moderate. Example: ``client.moderate(text="gg", metadata={"channel": "c1"}).decision``"""
        return self._loop.run(self._client.moderate(text, images=images, policy=policy, metadata=metadata,
                                                    item_id=item_id, timeout_s=timeout_s))

    def moderate_many(self, items: Iterable[Item | str], *, policy: str = "",
                      timeout_s: float | None = None) -> list[Verdict | ModerationError]:
        """See AsyncClient.moderate_many."""
        return self._loop.run(self._client.moderate_many(list(items), policy=policy, timeout_s=timeout_s))

    def chat(self, *, policy: str = "", ordered: bool = True, window: int = 64, deadline_ms: int | None = None,
             grace_s: float = 0.25, stream_timeout_s: float | None = None) -> Chat:
        """A blocking chat session (see AsyncClient.chat). Use as `with client.chat() as chat:`."""
        async def make() -> AsyncChat:  # in the loop thread: gRPC aio channels belong to the loop they are made in
            return self._client.chat(policy=policy, ordered=ordered, window=window, deadline_ms=deadline_ms,
                                     grace_s=grace_s, stream_timeout_s=stream_timeout_s)

        return Chat(self._loop, self._loop.run(make()))

    def close(self) -> None:
        """Send what waits, wait for every accepted item, close the channels and stop the loop thread."""
        if self._closed:
            return
        self._closed = True
        try:
            self._loop.run(self._client.close())
        finally:
            self._loop.stop()


class Chat:
    """Blocking wrapper of `AsyncChat`: `send` and `receive` may be called from different threads
    at the same time (send from a producer thread, receive from a consumer thread)."""

    def __init__(self, loop: _LoopThread, chat: AsyncChat) -> None:
        self._loop = loop
        self._chat = chat

    def __enter__(self) -> Chat:
        self._loop.run(self._chat.__aenter__())
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def send(self, text: str | None = None, *, images: Sequence[bytes] = (), metadata: Mapping[str, str] | None = None,
             item_id: str = "", request_id: str = "", deadline_ms: int | None = None) -> str:
        """Send one message (blocks while the window is full); returns its request id."""
        return self._loop.run(self._chat.send(text, images=images, metadata=metadata, item_id=item_id,
                                              request_id=request_id, deadline_ms=deadline_ms))

    def receive(self, timeout_s: float | None = None) -> ChatReply:
        """The next answer; StopIteration once sending is done and all are answered; TimeoutError
        after `timeout_s` without one."""
        try:
            return self._loop.run(self._chat.receive(), timeout_s)
        except StopAsyncIteration:
            raise StopIteration from None

    def __iter__(self) -> Iterator[ChatReply]:
        while True:
            try:
                yield self.receive()
            except StopIteration:
                return

    def done_sending(self) -> None:
        """No more messages (answers to those sent still arrive)."""
        self._loop.run(self._chat.done_sending())

    def close(self) -> None:
        """See AsyncChat.close."""
        self._loop.run(self._chat.close())


__all__ = ["Chat", "Client"]
