"""The router's upstream client: one channel without interceptors, whose ModelInfer calls are traced one
by one while tracing is on (tests/unit/common/test_trace_interceptors.py covers what a traced call does;
tests/integration/test_observability.py the spans of a real router -> text call)."""

from __future__ import annotations

from typing import Any

from services.common.tracing.trace_interceptors import TracedUnaryUnary
from services.router.upstream_client import UpstreamClient
from tests.stubs import InMemoryTracing


def interceptors(client: UpstreamClient) -> list[Any]:
    channel: Any = client.client._channel
    return list(getattr(channel, "_unary_unary_interceptors", None) or [])


async def test_with_tracing_on_the_channel_has_no_interceptors_and_model_infer_is_traced_per_call() -> None:
    with InMemoryTracing():
        client = UpstreamClient("127.0.0.1:1", channel_args=[("grpc.dscp", 46)])
        try:
            assert interceptors(client) == []
            assert isinstance(client.client._client_stub.ModelInfer, TracedUnaryUnary)
        finally:
            await client.close()


async def test_with_tracing_off_nothing_is_wrapped() -> None:
    client = UpstreamClient("127.0.0.1:1", channel_args=[])
    try:
        assert interceptors(client) == []
        assert not isinstance(client.client._client_stub.ModelInfer, TracedUnaryUnary)
    finally:
        await client.close()
