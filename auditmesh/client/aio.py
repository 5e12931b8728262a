"""`AsyncClient`: the asyncio (grpc.aio) client of the auditmesh router.

Concurrent `moderate` calls are batched for the caller (`auditmesh.client.autobatch`): calls that
arrive within `linger_ms` of each other share one `ModerateBatch` call of at most `max_batch_items`
items, and each caller gets its own `Verdict` or `ModerationError`. Retries follow
`auditmesh.client.retry` (the router's RetryInfo first, jittered backoff otherwise) and never outlive
the call's deadline; calls (and retries) go round robin over the router addresses.

Example::

    async with AsyncClient(["127.0.0.1:8100"], api_key="...") as client:
        verdict = await client.moderate(text="you are all great")
        verdicts = await client.moderate_many(["gg", Item(text="see pic", images=[png])])
        async with client.chat() as chat:
            await chat.send("hello")
            reply = await chat.receive()
"""

from __future__ import annotations

import asyncio
import random
from typing import Any, Iterable, Mapping, Sequence

import grpc
from auditmesh.v1 import moderation_pb2 as pb
from auditmesh.v1 import moderation_pb2_grpc as pb_grpc

from auditmesh.client.autobatch import AutoBatcher
from auditmesh.client.chat import AsyncChat
from auditmesh.client.errors import ClientClosedError, ModerationError, from_rpc_error, from_status
from auditmesh.client.items import Item, Verdict, to_item, verdict_from
from auditmesh.client.retry import RetryPolicy
from auditmesh.client.settings import DEFAULT_CHANNEL_OPTIONS, ClientConfig, ClientTls, RoundRobin, api_key_from


class AsyncClient:
    """The router's moderation API for asyncio code. Create it (and use it) inside one event loop.

    Arguments: `addresses` ("host:port", one or several routers: calls go round robin), `api_key`
    (default $AUDITMESH_API_KEY), `timeout_s` (deadline of each call, retries included, unless a call
    gives its own), `linger_ms` (how long a single item may wait for others to share its batch),
    `max_batch_items` (at most the router's `limits.max_batch_items`, 128 as shipped), `batching`
    (False: one `Moderate` call per `moderate`), `send_when_idle` (True: while no batch call is in
    flight, send at once instead of lingering; items then linger only while calls are in flight),
    `retry` (a RetryPolicy), `channel_options`, `interceptors` (grpc.aio client interceptors, e.g. tracing, on every channel),
    `tls` (a ClientTls: TLS or mutual TLS to the routers; default plaintext). Or pass a ready
    `config=ClientConfig(...)`.
    """

    def __init__(self, addresses: str | Sequence[str] = ("127.0.0.1:8100",), *, api_key: str | None = None,
                 timeout_s: float = 2.0, linger_ms: float = 5.0, max_batch_items: int = 64, batching: bool = True,
                 send_when_idle: bool = True, retry: RetryPolicy | None = None,
                 channel_options: Sequence[tuple[str, int | str]] = DEFAULT_CHANNEL_OPTIONS,
                 config: ClientConfig | None = None, interceptors: Sequence[grpc.aio.ClientInterceptor] = (),
                 rng: random.Random | None = None, tls: ClientTls | None = None) -> None:
        if config is None:
            config = ClientConfig(addresses=(addresses,) if isinstance(addresses, str) else tuple(addresses),
                                  api_key=api_key_from(api_key), timeout_s=timeout_s, linger_ms=linger_ms,
                                  max_batch_items=max_batch_items, batching=batching, send_when_idle=send_when_idle,
                                  retry=retry or RetryPolicy(),
                                  channel_options=channel_options, tls=tls)
        self.config = config
        self._rng = rng or random.Random()
        self._interceptors = tuple(interceptors)
        self._metadata = (("x-api-key", config.api_key),)
        self._channels: list[grpc.aio.Channel] = []
        self._stubs: list[Any] = []
        self._picker = RoundRobin(len(config.addresses))
        self._batcher: AutoBatcher[Verdict] = AutoBatcher(self._send_batch, linger_s=config.linger_s,
                                                          max_items=config.max_batch_items, retry=config.retry,
                                                          send_when_idle=config.send_when_idle, rng=self._rng)
        self._closed = False

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    @property
    def batch_calls(self) -> int:
        """ModerateBatch calls this client has sent (auto-batching and moderate_many, retries included)."""
        return self._batcher.calls_sent

    async def moderate(self, text: str | None = None, *, images: Sequence[bytes] = (), policy: str = "",
                       metadata: Mapping[str, str] | None = None, item_id: str = "",
                       timeout_s: float | None = None) -> Verdict:
        """Moderate one item (text and/or images, judged together) under `policy` (empty: the tenant's
        default). Returns its Verdict; raises ModerationError (with the gRPC code) when it is refused.

        Example::

            verdict = await client.moderate(text="buy cheap followers at spam.example", metadata={"channel": "c1"})
            if verdict.blocked: ...
        """
        item = to_item(Item(text=text, images=images, metadata=metadata or {}, id=item_id))
        deadline = self._deadline(timeout_s)
        if not self.config.batching:
            return await self._moderate_one(item, policy, deadline)
        self._check_open()
        return await self._batcher.submit(policy, item, deadline=deadline)

    async def moderate_many(self, items: Iterable[Item | str], *, policy: str = "",
                            timeout_s: float | None = None) -> list[Verdict | ModerationError]:
        """Moderate many items (strings are text items) in as few ModerateBatch calls as the batch size
        allows, retrying refused items. One entry per item, in order: its Verdict, or its ModerationError.

        Example::

            for text, result in zip(lines, await client.moderate_many(lines)):
                if isinstance(result, ModerationError): ...
        """
        self._check_open()
        deadline = self._deadline(timeout_s)
        messages = [to_item(item) for item in items]
        results = await asyncio.gather(*(self._batcher.submit(policy, message, deadline=deadline) for message in messages),
                                       return_exceptions=True)
        out: list[Verdict | ModerationError] = []
        for result in results:
            if isinstance(result, (Verdict, ModerationError)):
                out.append(result)
            else:
                raise result  # a bug (or cancellation), never an item's outcome
        return out

    def chat(self, *, policy: str = "", ordered: bool = True, window: int = 64, deadline_ms: int | None = None,
             grace_s: float = 0.25, stream_timeout_s: float | None = None) -> AsyncChat:
        """A chat session over one ModerateStream call (see `auditmesh.client.chat`): `window` messages
        outstanding at most, each with `deadline_ms` (default: this client's timeout), answers in send
        order or (`ordered=False`) as they come. Use as `async with client.chat() as chat:`."""
        self._check_open()
        return AsyncChat(self._next_stub(), self._metadata, policy=policy, ordered=ordered, window=window,
                         deadline_ms=deadline_ms or int(self.config.timeout_s * 1000), grace_s=grace_s,
                         stream_timeout_s=stream_timeout_s)

    async def close(self) -> None:
        """Send what waits, wait for every accepted item to be settled, then close the channels."""
        if self._closed:
            return
        self._closed = True
        await self._batcher.close()
        await asyncio.gather(*(channel.close() for channel in self._channels))

    # -- calls --------------------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosedError()

    def _deadline(self, timeout_s: float | None) -> float:
        timeout = self.config.timeout_s if timeout_s is None else timeout_s
        if timeout <= 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout}")
        return asyncio.get_running_loop().time() + timeout

    def _next_stub(self) -> Any:
        if not self._stubs:  # channels bind to the running loop: create them in it, on first use
            tls = self.config.tls
            if tls is None:
                self._channels = [grpc.aio.insecure_channel(address, options=list(self.config.channel_options),
                                                            interceptors=self._interceptors or None)
                                  for address in self.config.addresses]
            else:
                credentials = tls.credentials()
                self._channels = [grpc.aio.secure_channel(address, credentials,
                                                          options=[*self.config.channel_options, *tls.channel_options()],
                                                          interceptors=self._interceptors or None)
                                  for address in self.config.addresses]
            self._stubs = [pb_grpc.ModerationServiceStub(channel) for channel in self._channels]
        return self._stubs[self._picker.next()]

    async def _send_batch(self, policy: str, items: Sequence[Any], timeout_s: float) -> list[Verdict | ModerationError]:
        try:
            response = await self._next_stub().ModerateBatch(pb.ModerateBatchRequest(items=items, policy=policy),
                                                             metadata=self._metadata, timeout=timeout_s)
        except grpc.aio.AioRpcError as error:
            raise from_rpc_error(error) from None
        return [from_status(result.error, result.item_id) if result.HasField("error") else verdict_from(result)
                for result in response.results]

    async def _moderate_one(self, item: Any, policy: str, deadline: float) -> Verdict:
        """One Moderate call per item (batching off), retried by the policy within the deadline."""
        loop = asyncio.get_running_loop()
        request = pb.ModerateRequest(item=item, policy=policy)
        attempts = 0
        while True:
            self._check_open()
            attempts += 1
            remaining = deadline - loop.time()
            try:
                return verdict_from(await self._next_stub().Moderate(request, metadata=self._metadata,
                                                                     timeout=max(remaining, 0.001)))
            except grpc.aio.AioRpcError as rpc_error:
                error = from_rpc_error(rpc_error)
            delay = self.config.retry.delay_s(attempts, error.code.name, error.message, error.retry_after_s,
                                              remaining_s=deadline - loop.time(), rng=self._rng)
            if delay is None:
                raise error.with_attempts(attempts)
            await asyncio.sleep(delay)


__all__ = ["AsyncClient"]
