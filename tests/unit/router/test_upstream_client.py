"""The router's upstream client: unsampled calls take the uninstrumented channel with the "not sampled"
traceparent in their metadata; sampled calls, and calls outside any span, take the instrumented one."""

from __future__ import annotations

from typing import Any, Iterator

import pytest
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from services.common.telemetry import tracer
from services.router.upstream_client import UpstreamClient
from tests.stubs import InMemoryTracing

UNSAMPLED = SpanContext(0x0AF7651916CD43DD8448EB211C80319C, 0xB7AD6B7169203331, is_remote=False,
                        trace_flags=TraceFlags(TraceFlags.DEFAULT))


class FakeClient:
    """Records the headers each `infer` was sent with."""

    def __init__(self) -> None:
        self.headers: list[Any] = []
        self.closed = False

    async def infer(self, model_name: str, inputs: Any, **options: Any) -> str:
        self.headers.append(options.get("headers"))
        return model_name

    async def close(self) -> None:
        self.closed = True


@pytest.fixture
def tracing() -> Iterator[InMemoryTracing]:
    with InMemoryTracing() as tracing:
        yield tracing


async def test_unsampled_calls_skip_the_instrumented_channel_and_carry_the_decision(tracing: InMemoryTracing) -> None:
    client = UpstreamClient("127.0.0.1:1", channel_args=[("grpc.dscp", 46)])
    await client.close()  # the real channels; fakes stand in for the calls
    traced, plain = FakeClient(), FakeClient()
    client.traced, client._plain = traced, plain
    with trace.use_span(NonRecordingSpan(UNSAMPLED)):
        assert await client.infer("m", [], headers={"x-extra": "1"}) == "m"
    assert plain.headers == [{"x-extra": "1", "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"}]
    with tracer().start_as_current_span("sampled"):
        await client.infer("m", [])
    await client.infer("m", [])  # outside any span: the instrumented channel's interceptor decides
    assert traced.headers == [None, None] and len(plain.headers) == 1
    await client.close()
    assert traced.closed and plain.closed


async def test_one_channel_while_tracing_is_off() -> None:
    client = UpstreamClient("127.0.0.1:1", channel_args=[])
    assert client._plain is None
    await client.close()
    client.traced = traced = FakeClient()
    with trace.use_span(NonRecordingSpan(UNSAMPLED)):
        await client.infer("m", [])
    assert traced.headers == [None]
