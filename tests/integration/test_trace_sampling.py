"""Sampling across a real gRPC hop on loopback: a grpc.aio client made while tracing is on (so the
client instrumentor wraps it) calls a server built with `server_interceptors()`. An unsampled caller's
decision travels in the metadata and the server records nothing; a sampled caller gets the library's
client and server spans; a new trace is recorded on both sides or on neither."""

from __future__ import annotations

from dataclasses import dataclass
from typing import AsyncIterator

import grpc
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import sampling
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, TraceFlags

from services.common.tracing.telemetry import (install_tracing, server_interceptors, shutdown_tracing, tracer,
                                       uninstrumented_channels)

METHOD = "/test.Echo/Call"


class Echo:
    """A server whose handler answers with the trace id and flags of the span current in it."""

    def __init__(self) -> None:
        self.server = grpc.aio.server(interceptors=server_interceptors())

        async def call(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
            current = trace.get_current_span().get_span_context()
            return f"{current.trace_id:032x}-{int(current.trace_flags.sampled)}".encode()

        handlers = {"Call": grpc.unary_unary_rpc_method_handler(call)}
        self.server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("test.Echo", handlers)])
        self.port = self.server.add_insecure_port("127.0.0.1:0")


@dataclass
class Hop:
    call: grpc.aio.UnaryUnaryMultiCallable
    exporter: InMemorySpanExporter
    address: str


@pytest.fixture
async def hop() -> AsyncIterator[Hop]:
    """Tracing at a 50% ratio, a server and an instrumented channel to it."""
    exporter = InMemorySpanExporter()
    install_tracing("auditmesh-test", exporter, sampler=sampling.ParentBased(sampling.TraceIdRatioBased(0.5)),
                    batch=False)
    echo = Echo()
    await echo.server.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{echo.port}")
    try:
        yield Hop(channel.unary_unary(METHOD), exporter, f"127.0.0.1:{echo.port}")
    finally:
        await channel.close()
        await echo.server.stop(None)
        shutdown_tracing()


async def test_an_unsampled_caller_is_followed_and_nothing_is_recorded(hop: Hop) -> None:
    call, exporter = hop.call, hop.exporter
    caller = SpanContext(0x0AF7651916CD43DD8448EB211C80319C, 0xB7AD6B7169203331, is_remote=False,
                         trace_flags=TraceFlags(TraceFlags.DEFAULT))
    with trace.use_span(NonRecordingSpan(caller)):
        answer = await call(b"", timeout=5)
    assert answer == b"0af7651916cd43dd8448eb211c80319c-0"
    assert exporter.get_finished_spans() == ()


async def test_the_callers_context_is_the_handlers_and_goes_away_with_the_call(hop: Hop) -> None:
    """The server's fast path makes the caller's context current without wrapping the handler, which
    relies on grpc.aio running each call's interceptors and handler in a task of the call's own."""
    call = hop.call
    for trace_id in (0x0AF7651916CD43DD8448EB211C80319C, 0x1BF7651916CD43DD8448EB211C80319C):
        caller = SpanContext(trace_id, 0xB7AD6B7169203331, is_remote=False, trace_flags=TraceFlags(TraceFlags.DEFAULT))
        with trace.use_span(NonRecordingSpan(caller)):
            assert await call(b"", timeout=5) == f"{trace_id:032x}-0".encode()
    with uninstrumented_channels():  # a call without any trace context
        channel = grpc.aio.insecure_channel(hop.address)
    async with channel:
        answer = (await channel.unary_unary(METHOD)(b"", timeout=5)).decode()
    assert not answer.startswith(("0af7651916cd43dd8448eb211c80319c", "1bf7651916cd43dd8448eb211c80319c"))


async def test_a_sampled_caller_gets_client_and_server_spans(hop: Hop) -> None:
    call, exporter = hop.call, hop.exporter
    parent = SpanContext(0x0AF7651916CD43DD8448EB211C80319C, 0xB7AD6B7169203331, is_remote=False,
                         trace_flags=TraceFlags(TraceFlags.SAMPLED))
    with tracer().start_as_current_span("caller", context=trace.set_span_in_context(NonRecordingSpan(parent))):
        answer = await call(b"", timeout=5)
    assert answer == b"0af7651916cd43dd8448eb211c80319c-1"
    spans = {span.kind: span for span in exporter.get_finished_spans() if span.name == METHOD}
    client, server = spans[SpanKind.CLIENT], spans[SpanKind.SERVER]
    assert server.parent is not None and client.context is not None and server.parent.span_id == client.context.span_id


async def test_a_new_trace_is_recorded_on_both_sides_or_on_neither(hop: Hop) -> None:
    call, exporter = hop.call, hop.exporter
    answers = [(await call(b"", timeout=5)).decode() for _ in range(40)]
    sampled = {answer.split("-")[0] for answer in answers if answer.endswith("-1")}
    by_kind: dict[SpanKind, set[str]] = {SpanKind.CLIENT: set(), SpanKind.SERVER: set()}
    for span in exporter.get_finished_spans():
        assert span.context is not None
        by_kind[span.kind].add(f"{span.context.trace_id:032x}")
    assert sampled and len(sampled) < len(answers)  # a 50% ratio: some of each (40 draws)
    assert by_kind[SpanKind.CLIENT] == by_kind[SpanKind.SERVER] == sampled
