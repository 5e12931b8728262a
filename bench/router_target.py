"""The `auditmesh` path: each arrival is one `Moderate` call to the router, as its tenant (or, with
`BatchRouterSender`, one `ModerateBatch` call of several items, for clients that batch).

Requests are built once per input (protobuf encoding is not what is measured). Each call carries a
gRPC deadline per item kind; the answer's status name is returned, and degraded answers (OK, but a
stage was skipped or failed) are counted per tenant in `degraded` so a fast-but-skipped answer is
visible in the report. Errors are counted by status and message in `error_details` (digits folded
to `#`), which tells a router's shed ("shed: ...") from the client's own deadline ("Deadline Exceeded").

Example::

    async with grpc.aio.insecure_channel(address) as channel:
        send = RouterSender(channel, inputs, keys={"chat": "key-1"}, deadlines_s={"text": 0.5})
        await send(Arrival(0.0, "text", "chat", 3))   # "OK"
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, Mapping

import grpc
from auditmesh.v1 import moderation_pb2 as pb
from auditmesh.v1 import moderation_pb2_grpc as pb_grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from bench.loadgen import Arrival
from bench.payloads import KINDS, BenchInputs

#: Channel options: images are up to a few MiB, like the router's own limits.
CHANNEL_OPTIONS = (("grpc.max_send_message_length", 64 << 20), ("grpc.max_receive_message_length", 64 << 20))
MAX_DISTINCT_DETAILS = 32  # bounded: messages carry ids and timings


def error_key(code: str, details: str | None) -> str:
    """'DEADLINE_EXCEEDED: shed: 12 ms left' -> 'DEADLINE_EXCEEDED: shed: # ms left' (at most 120 chars).

    Example::

        >>> error_key("RESOURCE_EXHAUSTED", "over quota, retry in 0.25 s")
        'RESOURCE_EXHAUSTED: over quota, retry in #.# s'
    """
    return f"{code}: {re.sub(r'[0-9]+', '#', details or '')}"[:120]


def _part(kind: str, payload: bytes) -> pb.Part:
    return pb.Part(text=payload.decode("utf-8")) if kind == "text" else pb.Part(image=pb.Image(data=payload))


def build_requests(inputs: BenchInputs) -> dict[str, list[pb.ModerateRequest]]:
    """One ModerateRequest per input, by kind."""
    return {kind: [pb.ModerateRequest(item=pb.Item(id=f"{kind}-{i}", parts=[_part(kind, payload)]))
                   for i, payload in enumerate(inputs.pool(kind))] for kind in KINDS}


class RouterSender:
    """A `bench.loadgen.Sender` that calls the router's Moderate with the arrival's tenant key, on
    `channel`, or on `channel[tenant]` when given one channel per tenant (router lanes)."""

    def __init__(self, channel: grpc.aio.Channel | Mapping[str, grpc.aio.Channel], inputs: BenchInputs, *,
                 keys: Mapping[str, str], deadlines_s: Mapping[str, float]) -> None:
        channels = channel if isinstance(channel, Mapping) else {tenant: channel for tenant in keys}
        self._stubs: dict[str, Any] = {tenant: pb_grpc.ModerationServiceStub(channels[tenant]) for tenant in keys}
        self._requests = build_requests(inputs)
        self._metadata = {tenant: (("x-api-key", key),) for tenant, key in keys.items()}
        self._deadlines_s = dict(deadlines_s)
        self.degraded: Counter[str] = Counter()
        self.error_details: Counter[str] = Counter()

    async def __call__(self, arrival: Arrival) -> str:
        requests = self._requests[arrival.kind]
        try:
            response = await self._stubs[arrival.tenant].Moderate(requests[arrival.index % len(requests)],
                                                 metadata=self._metadata[arrival.tenant],
                                                 timeout=self._deadlines_s[arrival.kind])
        except grpc.aio.AioRpcError as error:
            code = str(error.code().name)
            key = error_key(code, error.details())
            if key in self.error_details or len(self.error_details) < MAX_DISTINCT_DETAILS:
                self.error_details[key] += 1
            return code
        if response.degraded:
            self.degraded[arrival.tenant] += 1
        return "OK"


class HealthSender:
    """A `bench.loadgen.Sender` that calls the router's grpc.health.v1 Check: the same client, channel and
    hop as Moderate with no work behind it, i.e. the floor under any Moderate latency."""

    def __init__(self, channel: grpc.aio.Channel, timeout_s: float = 1.0) -> None:
        self._stub: Any = health_pb2_grpc.HealthStub(channel)
        self._timeout_s = timeout_s

    async def __call__(self, arrival: Arrival) -> str:
        try:
            await self._stub.Check(health_pb2.HealthCheckRequest(), timeout=self._timeout_s)
        except grpc.aio.AioRpcError as error:
            return str(error.code().name)
        return "OK"


class BatchRouterSender:
    """A `bench.loadgen.Sender` for clients that batch: each arrival is one `ModerateBatch` call with
    `items_per_call` items of the arrival's kind, as its tenant, on `channel[tenant]` (or `channel`).
    "OK" when every item is answered; otherwise the status of the first failed item (or of the call).
    """

    def __init__(self, channel: grpc.aio.Channel | Mapping[str, grpc.aio.Channel], inputs: BenchInputs, *,
                 keys: Mapping[str, str], deadlines_s: Mapping[str, float], items_per_call: int) -> None:
        if items_per_call < 1:
            raise ValueError(f"items_per_call must be >= 1, got {items_per_call}")
        channels = channel if isinstance(channel, Mapping) else {tenant: channel for tenant in keys}
        self._stubs: dict[str, Any] = {tenant: pb_grpc.ModerationServiceStub(channels[tenant]) for tenant in keys}
        self.items_per_call = items_per_call
        self._items = {kind: [request.item for request in requests] for kind, requests in build_requests(inputs).items()}
        self._metadata = {tenant: (("x-api-key", key),) for tenant, key in keys.items()}
        self._deadlines_s = dict(deadlines_s)
        self.error_details: Counter[str] = Counter()

    def _request(self, kind: str, start: int) -> pb.ModerateBatchRequest:
        pool = self._items[kind]
        return pb.ModerateBatchRequest(items=[pool[(start + i) % len(pool)] for i in range(self.items_per_call)])

    async def __call__(self, arrival: Arrival) -> str:
        try:
            response = await self._stubs[arrival.tenant].ModerateBatch(
                self._request(arrival.kind, arrival.index * self.items_per_call),
                metadata=self._metadata[arrival.tenant], timeout=self._deadlines_s[arrival.kind])
        except grpc.aio.AioRpcError as error:
            return self._count(str(error.code().name), error.details())
        failed = next((result for result in response.results if result.HasField("error")), None)
        if failed is None:
            return "OK"
        return self._count(status_name(failed.error.code), failed.error.message)

    def _count(self, code: str, details: str | None) -> str:
        key = error_key(code, details)
        if key in self.error_details or len(self.error_details) < MAX_DISTINCT_DETAILS:
            self.error_details[key] += 1
        return code


def status_name(code: int) -> str:
    """The name of a numeric google.rpc code ("UNKNOWN" for a number gRPC does not define)."""
    return next((status.name for status in grpc.StatusCode if status.value[0] == code), "UNKNOWN")
