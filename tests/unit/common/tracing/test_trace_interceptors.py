"""The instrumentation library's aio interceptors behind a sampling check: an unsampled call starts no
span yet carries its context on; a sampled one goes through the library as before."""

from __future__ import annotations

import asyncio
from collections import namedtuple
from typing import Any, Iterator

import grpc
import pytest
from grpc.aio import ClientCallDetails, Metadata
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider, sampling
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, TraceFlags
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from services.common.tracing.telemetry import _traced
from services.common.tracing.trace_interceptors import (SampledOnlyAioClientInstrumentor, TracedUnaryUnary,
                                                UnaryUnaryClientInterceptor, sampled_only_server_interceptor,
                                                w3c_context)
from services.common.tracing.trace_sampling import ReservingIdGenerator, SamplingPlan

METHOD = "/inference.GRPCInferenceService/ModelInfer"
Metadatum = namedtuple("Metadatum", "key value")
UNSAMPLED = SpanContext(0x0AF7651916CD43DD8448EB211C80319C, 0xB7AD6B7169203331, is_remote=False,
                        trace_flags=TraceFlags(TraceFlags.DEFAULT))
SAMPLED = SpanContext(UNSAMPLED.trace_id, UNSAMPLED.span_id, is_remote=False, trace_flags=TraceFlags(TraceFlags.SAMPLED))


class Tracing:
    """A provider (not the global one) with an in-memory exporter, and the sampling plan over it."""

    def __init__(self, sampler: sampling.Sampler) -> None:
        self.exporter = InMemorySpanExporter()
        ids = ReservingIdGenerator()
        self.provider = TracerProvider(sampler=sampler, id_generator=ids)
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.plan = SamplingPlan(self.provider.sampler, ids)

    def spans(self, kind: SpanKind) -> list[Any]:
        return [span for span in self.exporter.get_finished_spans() if span.kind == kind]


@pytest.fixture
def ratio() -> Iterator[Tracing]:
    """parentbased_traceidratio at 1%, as `OTEL_TRACES_SAMPLER_ARG=0.01` configures it."""
    tracing = Tracing(sampling.ParentBased(sampling.TraceIdRatioBased(0.01)))
    yield tracing
    tracing.provider.shutdown()


# -- client ----------------------------------------------------------------------------------------

class FakeCall:
    """What a grpc.aio continuation returns, enough for the library's unary wrapper."""

    async def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.OK

    async def details(self) -> str:
        return ""

    def add_done_callback(self, callback: Any) -> None:
        callback(self)


async def client_call(tracing: Tracing, parent: SpanContext | None) -> dict[str, str]:
    """One unary call through the client interceptor under `parent`; the metadata it sent."""
    interceptor = UnaryUnaryClientInterceptor(tracing.plan, tracing.provider.get_tracer("test"))
    sent: list[ClientCallDetails] = []

    async def continuation(details: ClientCallDetails, request: bytes) -> FakeCall:
        sent.append(details)
        return FakeCall()

    details = ClientCallDetails(METHOD, 1.0, Metadata(("x-api-key", "k")), None, None)
    if parent is None:
        await interceptor.intercept_unary_unary(continuation, details, b"request")
    else:
        with trace.use_span(NonRecordingSpan(parent) if not parent.trace_flags.sampled
                            else tracing.provider.get_tracer("test").start_span("caller", trace.set_span_in_context(
                                NonRecordingSpan(parent))), end_on_exit=True):
            await interceptor.intercept_unary_unary(continuation, details, b"request")
    (call,) = sent
    return dict(call.metadata)


async def test_an_unsampled_client_call_starts_no_span_but_carries_its_context(ratio: Tracing) -> None:
    metadata = await client_call(ratio, UNSAMPLED)
    # the caller's own span id: no span was started for the call
    assert metadata["traceparent"] == "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"
    assert metadata["x-api-key"] == "k"
    assert ratio.exporter.get_finished_spans() == ()


async def test_a_sampled_client_call_gets_the_library_span(ratio: Tracing) -> None:
    metadata = await client_call(ratio, SAMPLED)
    (client,) = ratio.spans(SpanKind.CLIENT)
    assert client.name == METHOD and client.context.trace_id == SAMPLED.trace_id
    assert metadata["traceparent"] == f"00-{SAMPLED.trace_id:032x}-{client.context.span_id:016x}-01"


async def test_a_client_call_outside_any_span_is_left_to_the_sampler() -> None:
    tracing = Tracing(sampling.ParentBased(sampling.ALWAYS_ON))
    metadata = await client_call(tracing, None)
    (client,) = tracing.spans(SpanKind.CLIENT)
    _, trace_id, span_id, flags = metadata["traceparent"].split("-")
    assert client.parent is None and (int(trace_id, 16), int(span_id, 16)) == (client.context.trace_id, client.context.span_id)
    assert int(flags, 16) & TraceFlags.SAMPLED


async def test_a_client_under_an_unsampled_span_still_samples_when_the_sampler_ignores_parents() -> None:
    tracing = Tracing(sampling.ALWAYS_ON)
    await client_call(tracing, UNSAMPLED)
    assert len(tracing.spans(SpanKind.CLIENT)) == 1


class FakeUnaryCall:
    """What a grpc.aio unary-unary multicallable returns: awaitable, with code() and details()."""

    def __init__(self, response: bytes, code: grpc.StatusCode = grpc.StatusCode.OK) -> None:
        self.response, self._code = response, code

    async def code(self) -> grpc.StatusCode:
        return self._code

    async def details(self) -> str:
        return "" if self._code == grpc.StatusCode.OK else "upstream down"

    def add_done_callback(self, callback: Any) -> None:
        callback(self)

    def __await__(self) -> Any:
        if self._code != grpc.StatusCode.OK:
            raise grpc.aio.AioRpcError(self._code, grpc.aio.Metadata(), grpc.aio.Metadata(), "upstream down")
        yield from asyncio.sleep(0).__await__()
        return self.response


class FakeMultiCallable:
    """Records the keyword arguments of each call; answers with FakeUnaryCall(b"response", code)."""

    def __init__(self, code: grpc.StatusCode = grpc.StatusCode.OK) -> None:
        self.code = code
        self.calls: list[dict[str, Any]] = []

    def __call__(self, request: bytes, **options: Any) -> FakeUnaryCall:
        self.calls.append({"request": request, **options})
        return FakeUnaryCall(b"response", self.code)


def traced_call(tracing: Tracing, code: grpc.StatusCode = grpc.StatusCode.OK) -> tuple[TracedUnaryUnary, FakeMultiCallable]:
    inner = FakeMultiCallable(code)
    interceptor = UnaryUnaryClientInterceptor(tracing.plan, tracing.provider.get_tracer("test"))
    return TracedUnaryUnary(inner, METHOD, interceptor), inner


async def test_a_traced_unary_call_under_an_unsampled_span_only_carries_the_context(ratio: Tracing) -> None:
    call, inner = traced_call(ratio)
    with trace.use_span(NonRecordingSpan(UNSAMPLED)):
        assert await call(b"request", metadata=(("x-api-key", "k"),), timeout=1.5) == b"response"
    (sent,) = inner.calls
    assert sent["request"] == b"request" and sent["timeout"] == 1.5
    assert dict(sent["metadata"]) == {"x-api-key": "k",
                                      "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"}
    assert ratio.exporter.get_finished_spans() == ()


async def test_a_sampled_traced_unary_call_gets_the_library_client_span(ratio: Tracing) -> None:
    call, inner = traced_call(ratio)
    with ratio.provider.get_tracer("test").start_as_current_span("caller", trace.set_span_in_context(NonRecordingSpan(SAMPLED))):
        assert await call(b"request", metadata=(("x-api-key", "k"),), timeout=1.5) == b"response"
    (client,) = ratio.spans(SpanKind.CLIENT)
    (sent,) = inner.calls
    assert client.name == METHOD and client.context.trace_id == SAMPLED.trace_id
    assert dict(sent["metadata"])["traceparent"] == f"00-{SAMPLED.trace_id:032x}-{client.context.span_id:016x}-01"
    assert dict(sent["metadata"])["x-api-key"] == "k" and sent["timeout"] == 1.5


async def test_a_traced_unary_call_outside_any_trace_goes_out_untouched(ratio: Tracing) -> None:
    call, inner = traced_call(ratio)
    assert await call(b"request", metadata=(("x-api-key", "k"),)) == b"response"
    (sent,) = inner.calls
    assert sent["metadata"] == (("x-api-key", "k"),) and ratio.exporter.get_finished_spans() == ()


async def test_a_failed_sampled_call_raises_and_its_span_records_the_status(ratio: Tracing) -> None:
    call, _ = traced_call(ratio, grpc.StatusCode.UNAVAILABLE)
    with ratio.provider.get_tracer("test").start_as_current_span("caller", trace.set_span_in_context(NonRecordingSpan(SAMPLED))):
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await call(b"request", timeout=1.0)
    assert raised.value.code() == grpc.StatusCode.UNAVAILABLE
    (client,) = ratio.spans(SpanKind.CLIENT)
    assert client.attributes["rpc.grpc.status_code"] == grpc.StatusCode.UNAVAILABLE.value[0]
    assert not client.status.is_ok


def test_the_instrumentor_installs_the_sampled_only_interceptors(ratio: Tracing) -> None:
    instrumentor = SampledOnlyAioClientInstrumentor(ratio.plan)
    kwargs = instrumentor._add_interceptors(ratio.provider, {"interceptors": ["mine"]})
    assert isinstance(kwargs["interceptors"][0], UnaryUnaryClientInterceptor) and len(kwargs["interceptors"]) == 5
    assert kwargs["interceptors"][-1] == "mine"  # the channel's own interceptors run after ours, as with the library
    assert isinstance(instrumentor.unary_unary_interceptor(ratio.provider), UnaryUnaryClientInterceptor)


# -- server ----------------------------------------------------------------------------------------

class Details:
    def __init__(self, method: str, metadata: dict[str, str]) -> None:
        self.method = method
        self.invocation_metadata = tuple(Metadatum(key, value) for key, value in metadata.items())


class ServicerContext:
    """What the library reads from a grpc.aio servicer context."""

    def __init__(self, metadata: dict[str, str]) -> None:
        self.metadata = tuple(Metadatum(key, value) for key, value in metadata.items())

    def invocation_metadata(self) -> tuple[Metadatum, ...]:
        return self.metadata

    def peer(self) -> str:
        return "ipv4:127.0.0.1:50000"


async def serve(tracing: Tracing, metadata: dict[str, str], method: str = METHOD,
                starts_traces: bool = True) -> tuple[SpanContext, bool]:
    """One unary call through the server interceptor, run as grpc.aio runs it (interceptors, then the
    handler, in a task of the call's own); the span context the handler saw, and whether it got the
    servicer context unwrapped."""
    seen: list[tuple[SpanContext, Any]] = []

    async def behavior(request: bytes, context: Any) -> bytes:
        seen.append((trace.get_current_span().get_span_context(), context))
        return request

    handler = grpc.unary_unary_rpc_method_handler(behavior)

    async def continuation(details: Details) -> Any:
        return handler

    interceptor = sampled_only_server_interceptor(tracing.provider, tracing.plan, filter_=_traced,
                                                  starts_traces=starts_traces)
    servicer_context = ServicerContext(metadata)

    async def call() -> None:
        found = await interceptor.intercept_service(continuation, Details(method, metadata))
        assert await found.unary_unary(b"request", servicer_context) == b"request"

    await asyncio.create_task(call())
    (result,) = seen
    return result[0], (result[1] is servicer_context)


async def test_a_call_from_an_unsampled_caller_runs_in_its_context_without_a_span(ratio: Tracing) -> None:
    current, unwrapped = await serve(ratio, {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"})
    assert (current.trace_id, current.span_id) == (UNSAMPLED.trace_id, UNSAMPLED.span_id)
    assert current.is_remote and not current.trace_flags.sampled
    assert unwrapped and ratio.exporter.get_finished_spans() == ()


async def test_a_call_from_a_sampled_caller_gets_the_library_span(ratio: Tracing) -> None:
    current, unwrapped = await serve(ratio, {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"})
    (server,) = ratio.spans(SpanKind.SERVER)
    assert server.parent.span_id == UNSAMPLED.span_id and server.context.span_id == current.span_id
    assert server.attributes["rpc.method"] == "ModelInfer" and not unwrapped  # the library's context wrapper


async def test_a_new_trace_the_sampler_drops_runs_without_any_trace_context() -> None:
    first, unwrapped = await serve(Tracing(sampling.ParentBased(sampling.ALWAYS_OFF)), {})
    assert not first.is_valid and unwrapped  # nothing to carry on: the request is simply not traced


async def test_a_follower_starts_no_trace_for_a_call_without_context() -> None:
    tracing = Tracing(sampling.ParentBased(sampling.ALWAYS_ON))  # would sample every new trace
    current, unwrapped = await serve(tracing, {}, starts_traces=False)
    assert not current.is_valid and unwrapped and tracing.exporter.get_finished_spans() == ()
    current, _ = await serve(tracing, {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
                             starts_traces=False)
    (server,) = tracing.spans(SpanKind.SERVER)  # a sampled caller is still followed
    assert server.context.trace_id == UNSAMPLED.trace_id == current.trace_id


class EvenTraceIds(sampling.Sampler):
    """Samples exactly the new traces whose id is even; remembers every id it sampled."""

    def __init__(self) -> None:
        self.sampled: set[int] = set()

    def should_sample(self, parent_context: Any, trace_id: int, name: str, kind: Any = None, attributes: Any = None,
                      links: Any = None, trace_state: Any = None) -> sampling.SamplingResult:
        if trace_id % 2:
            return sampling.SamplingResult(sampling.Decision.DROP)
        self.sampled.add(trace_id)
        return sampling.SamplingResult(sampling.Decision.RECORD_AND_SAMPLE)

    def get_description(self) -> str:
        return "EvenTraceIds"


async def test_a_sampled_new_trace_is_the_one_the_decision_was_taken_on() -> None:
    """Regression guard: were the library to draw its own trace id after our decision, the configured
    ratio would be applied twice (1% of 1%) and sampled decisions would leave no trace."""
    sampler = EvenTraceIds()
    tracing = Tracing(sampling.ParentBased(sampler))
    for _ in range(40):
        await serve(tracing, {})
    traced = {span.context.trace_id for span in tracing.spans(SpanKind.SERVER)}
    assert traced and traced == sampler.sampled


async def test_health_checks_are_not_intercepted(ratio: Tracing) -> None:
    current, unwrapped = await serve(ratio, {}, method="/grpc.health.v1.Health/Check")
    assert not current.is_valid and unwrapped


@pytest.mark.parametrize("traceparent", ["00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00",
                                         "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
                                         "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-03"])
def test_the_quick_traceparent_reading_builds_what_the_propagator_extracts(traceparent: str) -> None:
    quick = w3c_context(traceparent)
    assert quick is not None
    mine, theirs = trace.get_current_span(quick).get_span_context(), trace.get_current_span(
        TraceContextTextMapPropagator().extract({"traceparent": traceparent})).get_span_context()
    assert mine == theirs and mine.is_remote and mine.trace_state == theirs.trace_state


@pytest.mark.parametrize("traceparent", ["00-00000000000000000000000000000000-b7ad6b7169203331-01",  # zero trace id
                                         "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",  # zero span id
                                         "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",  # upper case
                                         "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",  # another version
                                         "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-x",
                                         "00-0af7651916cd43dd8448eb211c80319c-b7ad6b716920333_-01", ""])
def test_anything_but_a_plain_version_00_traceparent_is_left_to_the_propagators(traceparent: str) -> None:
    assert w3c_context(traceparent) is None


async def test_a_caller_with_tracestate_gets_it_through_the_propagators(ratio: Tracing) -> None:
    current, _ = await serve(ratio, {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00",
                                     "tracestate": "vendor=opaque"})
    assert current.trace_id == UNSAMPLED.trace_id and current.trace_state.get("vendor") == "opaque"
