"""The `client` and `stream` paths: arrivals sent through `auditmesh.client`.

* `ClientSender`: each arrival is one single-item `AsyncClient.moderate` call, as its tenant, on
  that tenant's client (one per tenant, addressed to its lane). Concurrent arrivals are batched by the
  library (`linger_ms`, `max_batch_items`): this is "many concurrent single-item callers".
* `StreamSender`: each arrival is one message on a long-lived `ModerateStream` of its tenant (the
  library's chat helper, unordered delivery; `streams_per_tenant` streams, used in turn), answered
  when that message's reply arrives.

Both return the gRPC status name like the other senders (`bench/router_target.py`), count degraded
answers and errors by message. Inputs are the same texts and images as the other paths.

Example::

    async with ClientSender(addresses, inputs, keys={"chat": "k"}, deadlines_s={"text": 0.5}) as send:
        await send(Arrival(0.0, "text", "chat", 3))   # "OK"
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections import Counter
from types import TracebackType
from typing import Mapping

from auditmesh.client import AsyncChat, AsyncClient, ChatReply, ModerationError, Verdict
from bench.loadgen import Arrival
from bench.payloads import BenchInputs
from bench.router_target import MAX_DISTINCT_DETAILS, error_key

#: Client-side batching of the `client` scenario: the library's defaults.
CLIENT_LINGER_MS = 5.0
CLIENT_MAX_BATCH_ITEMS = 64


class _Counting:
    def __init__(self) -> None:
        self.degraded: Counter[str] = Counter()
        self.error_details: Counter[str] = Counter()

    def _outcome(self, tenant: str, result: Verdict | ModerationError) -> str:
        if isinstance(result, ModerationError):
            key = error_key(result.code.name, result.message)
            if key in self.error_details or len(self.error_details) < MAX_DISTINCT_DETAILS:
                self.error_details[key] += 1
            return str(result.code.name)
        if result.degraded:
            self.degraded[tenant] += 1
        return "OK"


class ClientSender(_Counting):
    """A `bench.loadgen.Sender` over one `AsyncClient` per tenant (see the module docstring).
    Use as `async with`: closing flushes and closes the clients."""

    def __init__(self, addresses: Mapping[str, str], inputs: BenchInputs, *, keys: Mapping[str, str],
                 deadlines_s: Mapping[str, float], linger_ms: float = CLIENT_LINGER_MS,
                 max_batch_items: int = CLIENT_MAX_BATCH_ITEMS) -> None:
        super().__init__()
        self._inputs = inputs
        self._deadlines_s = dict(deadlines_s)
        self._texts = [text.decode("utf-8") for text in inputs.texts]
        self.clients = {tenant: AsyncClient([addresses[tenant]], api_key=key, linger_ms=linger_ms,
                                            max_batch_items=max_batch_items) for tenant, key in keys.items()}

    async def __aenter__(self) -> ClientSender:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        traceback: TracebackType | None) -> None:
        await asyncio.gather(*(client.close() for client in self.clients.values()))

    @property
    def batch_calls(self) -> int:
        return sum(client.batch_calls for client in self.clients.values())

    async def __call__(self, arrival: Arrival) -> str:
        client = self.clients[arrival.tenant]
        timeout = self._deadlines_s[arrival.kind]
        try:
            if arrival.kind == "text":
                verdict = await client.moderate(text=self._texts[arrival.index % len(self._texts)], timeout_s=timeout)
            else:
                verdict = await client.moderate(images=[self._inputs.payload(arrival.kind, arrival.index)],
                                                timeout_s=timeout)
        except ModerationError as error:
            return self._outcome(arrival.tenant, error)
        return self._outcome(arrival.tenant, verdict)


class StreamSender(_Counting):
    """A `bench.loadgen.Sender` over long-lived ModerateStream chats, `streams_per_tenant` per tenant
    (see the module docstring). Use as `async with`."""

    def __init__(self, addresses: Mapping[str, str], inputs: BenchInputs, *, keys: Mapping[str, str],
                 deadlines_s: Mapping[str, float], streams_per_tenant: int = 4, window: int = 4096) -> None:
        super().__init__()
        self._inputs = inputs
        self._deadlines_ms = {kind: max(1, int(s * 1000)) for kind, s in deadlines_s.items()}
        self._texts = [text.decode("utf-8") for text in inputs.texts]
        self.clients = {tenant: AsyncClient([addresses[tenant]], api_key=key) for tenant, key in keys.items()}
        self._streams_per_tenant = streams_per_tenant
        self._window = window
        self._chats: dict[str, list[AsyncChat]] = {}
        self._turn = {tenant: itertools.cycle(range(streams_per_tenant)) for tenant in keys}
        self._waiting: dict[str, asyncio.Future[ChatReply]] = {}
        self._readers: list[asyncio.Task[None]] = []
        self._stack = contextlib.AsyncExitStack()

    async def __aenter__(self) -> StreamSender:
        for tenant, client in self.clients.items():
            await self._stack.enter_async_context(client)
            chats = [await self._stack.enter_async_context(client.chat(ordered=False, window=self._window))
                     for _ in range(self._streams_per_tenant)]
            self._chats[tenant] = chats
            self._readers += [asyncio.create_task(self._read(chat)) for chat in chats]
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        traceback: TracebackType | None) -> None:
        await self._stack.aclose()   # closes the chats (each waits for its answers), then the clients
        for reader in self._readers:
            reader.cancel()
        await asyncio.gather(*self._readers, return_exceptions=True)

    async def _read(self, chat: AsyncChat) -> None:
        async for reply in chat:
            waiting = self._waiting.pop(reply.request_id, None)
            if waiting is not None and not waiting.done():
                waiting.set_result(reply)

    async def __call__(self, arrival: Arrival) -> str:
        chat = self._chats[arrival.tenant][next(self._turn[arrival.tenant])]
        answer: asyncio.Future[ChatReply] = asyncio.get_running_loop().create_future()
        rid = f"{arrival.tenant}-{arrival.index}-{id(answer)}"
        self._waiting[rid] = answer
        deadline_ms = self._deadlines_ms[arrival.kind]
        try:
            if arrival.kind == "text":
                await chat.send(self._texts[arrival.index % len(self._texts)], request_id=rid, deadline_ms=deadline_ms)
            else:
                await chat.send(images=[self._inputs.payload(arrival.kind, arrival.index)], request_id=rid,
                                deadline_ms=deadline_ms)
            reply = await answer
        except ModerationError as error:
            self._waiting.pop(rid, None)
            return self._outcome(arrival.tenant, error)
        return self._outcome(arrival.tenant, reply.result)
