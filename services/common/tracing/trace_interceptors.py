"""The opentelemetry-instrumentation-grpc aio interceptors, with a fast path for calls that will not be sampled.

The library's interceptors start a span for every call and only then learn, from the sampler, that it
records nothing: at 1% sampling that is 99% of calls paying for attributes, peer parsing, a copy of the
metadata and a wrapped servicer context. These subclasses ask first (`services.common.tracing.trace_sampling`)
and hand a call to the library only when it will be sampled:

- client: under a valid, unsampled span the call goes straight on, carrying the propagation headers
  (W3C `traceparent` with the not-sampled flag, through the configured propagators) so the next hop
  follows the decision; otherwise (sampled, or no span) the library's interceptor runs as before;
- server: the caller's context is extracted from the metadata; under an unsampled caller that
  (non-recording) context is made current and the handler runs unwrapped; a call without trace
  context runs unwrapped and without any context when the sampler drops the new trace (or when this
  service starts no traces: `starts_traces=False`, the modality services, which follow the router);
  otherwise the library's interceptor runs (for a new trace with the id the decision was taken on, so
  the configured ratio holds).

Either way what reaches the next hop, the span helpers (`services.common.tracing.spans`) and the log lines is
the same context the library would have made current, so sampled traces look exactly as before.

`TracedUnaryUnary` applies the client interceptor to one method of an uninstrumented channel, call by
call in the caller's task: the router's KServe calls, where grpc.aio's own interceptor machinery (a task
per intercepted call) would cost more than the interceptor's work at 1% sampling.

Example::

    SampledOnlyAioClientInstrumentor(plan).instrument(tracer_provider=provider)   # every grpc.aio channel
    server = grpc.aio.server(interceptors=[sampled_only_server_interceptor(provider, plan, filter_=traced)])
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from typing import Any, Awaitable, Callable, Iterator

import grpc
from grpc.aio import ClientCallDetails, Metadata
from opentelemetry import trace
from opentelemetry.context import Context, attach
from opentelemetry.instrumentation import grpc as otel_grpc
from opentelemetry.instrumentation.grpc import _aio_client, _aio_server
from opentelemetry.instrumentation.grpc.version import __version__ as library_version
from opentelemetry.instrumentation.utils import is_instrumentation_enabled
from opentelemetry.propagate import extract, get_global_textmap, inject
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import INVALID_SPAN_CONTEXT, NonRecordingSpan, SpanContext, SpanKind, TraceFlags
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from services.common.tracing.trace_sampling import SamplingPlan, reserve_trace_id

_SCHEMA_URL = "https://opentelemetry.io/schemas/1.11.0"  # what the library's own factories pass
Handler = Any  # grpc.RpcMethodHandler (untyped)
# The library ships no type information: its classes are subclassed as Any.
lib_client: Any = _aio_client
lib_server: Any = _aio_server
lib_instrumentor: Any = otel_grpc.GrpcAioInstrumentorClient


class _SampledOnlyClient:
    """Mixed into each of the library's four aio client interceptors (see the module docstring)."""

    _filter: Callable[[Any], bool] | None  # set by the library's interceptor
    tracing_skipped: Callable[[ClientCallDetails], bool]  # the library's interceptor's method

    def __init__(self, plan: SamplingPlan, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # the library's interceptor, next in the MRO
        self._plan = plan

    def _propagation_headers(self) -> dict[str, str]:
        """The current context's propagation headers, keys lower case as gRPC metadata wants them (the
        configured propagators: OTEL_PROPAGATORS, W3C trace context by default)."""
        carrier: dict[str, str] = {}
        inject(carrier)
        return {key.lower(): value for key, value in carrier.items()}

    def unsampled_headers(self, current: SpanContext) -> tuple[tuple[str, str], ...] | None:
        """The propagation headers (as gRPC metadata) of `current`, the caller's span, when a call made
        now would take the fast path (unsampled and followed, no filter, instrumentation not suppressed);
        None when the library should handle the call."""
        if self._filter is not None or not self._plan.drops_child(current) or not is_instrumentation_enabled():
            return None
        return tuple(self._propagation_headers().items())

    async def _intercept(self, library: Callable[..., Awaitable[Any]], continuation: Callable[..., Awaitable[Any]],
                         details: ClientCallDetails, payload: Any) -> Any:
        """One call: under an unsampled span the sampler follows, straight on with the propagation headers
        added; otherwise through `library`, the library's own interceptor method for this kind of call."""
        if not self.tracing_skipped(details) and self._plan.drops_child(trace.get_current_span().get_span_context()):
            metadata = Metadata(*tuple(details.metadata or ()), *self._propagation_headers().items())
            unsampled = ClientCallDetails(details.method, details.timeout, metadata, details.credentials,
                                          details.wait_for_ready)
            return await continuation(unsampled, payload)
        return await library(continuation, details, payload)


class UnaryUnaryClientInterceptor(_SampledOnlyClient, lib_client.UnaryUnaryAioClientInterceptor):
    async def intercept_unary_unary(self, continuation: Callable[..., Awaitable[Any]], details: ClientCallDetails,
                                    request: Any) -> Any:
        return await self._intercept(super().intercept_unary_unary, continuation, details, request)


class UnaryStreamClientInterceptor(_SampledOnlyClient, lib_client.UnaryStreamAioClientInterceptor):
    async def intercept_unary_stream(self, continuation: Callable[..., Awaitable[Any]], details: ClientCallDetails,
                                     request: Any) -> Any:
        return await self._intercept(super().intercept_unary_stream, continuation, details, request)


class StreamUnaryClientInterceptor(_SampledOnlyClient, lib_client.StreamUnaryAioClientInterceptor):
    async def intercept_stream_unary(self, continuation: Callable[..., Awaitable[Any]], details: ClientCallDetails,
                                     request_iterator: Any) -> Any:
        return await self._intercept(super().intercept_stream_unary, continuation, details, request_iterator)


class StreamStreamClientInterceptor(_SampledOnlyClient, lib_client.StreamStreamAioClientInterceptor):
    async def intercept_stream_stream(self, continuation: Callable[..., Awaitable[Any]], details: ClientCallDetails,
                                      request_iterator: Any) -> Any:
        return await self._intercept(super().intercept_stream_stream, continuation, details, request_iterator)


class TracedUnaryUnary:
    """A unary-unary multicallable of an uninstrumented grpc.aio channel, with `UnaryUnaryClientInterceptor`
    applied call by call, in the caller's task, instead of through grpc.aio's interceptor machinery.

    grpc.aio runs the interceptors of every call on an intercepted channel in a task of its own: at 1%
    sampling that task costs more than what the interceptor does for the 99% of calls that are not
    sampled. Here a call made outside any trace context (an untraced request) goes out untouched; an
    unsampled call only gets the propagation headers (the "not sampled" `traceparent`) and goes straight
    on; a sampled call goes through the library's interceptor, which starts the CLIENT span, injects its
    context and ends the span with the call's status.

    Awaiting a call gives the response or raises `grpc.aio.AioRpcError`, as the wrapped multicallable does.

    Example::

        stub.ModelInfer = TracedUnaryUnary(stub.ModelInfer, "/inference.GRPCInferenceService/ModelInfer", interceptor)
        response = await stub.ModelInfer(request, metadata=(("x-key", "v"),), timeout=1.0)
    """

    def __init__(self, call: Callable[..., Any], method: str, interceptor: UnaryUnaryClientInterceptor) -> None:
        self._call = call
        self._method = method
        self._interceptor = interceptor

    async def __call__(self, request: Any, *, timeout: float | None = None, metadata: Any = None, credentials: Any = None,
                       wait_for_ready: bool | None = None, compression: Any = None) -> Any:
        current = trace.get_current_span().get_span_context()
        if not current.is_valid:  # an untraced request: nothing to carry
            return await self._call(request, timeout=timeout, metadata=metadata, credentials=credentials,
                                    wait_for_ready=wait_for_ready, compression=compression)
        headers = self._interceptor.unsampled_headers(current)
        if headers is not None:  # the fast path, without the interceptor's call details and metadata objects
            return await self._call(request, timeout=timeout, metadata=(*(metadata or ()), *headers),
                                    credentials=credentials, wait_for_ready=wait_for_ready, compression=compression)

        async def continuation(details: ClientCallDetails, message: Any) -> Any:
            return self._call(message, timeout=details.timeout, metadata=details.metadata, credentials=details.credentials,
                              wait_for_ready=details.wait_for_ready, compression=compression)

        details = ClientCallDetails(self._method, timeout, Metadata(*tuple(metadata)) if metadata else None, credentials,
                                    wait_for_ready)
        call = await self._interceptor.intercept_unary_unary(continuation, details, request)
        return await call


class SampledOnlyAioClientInstrumentor(lib_instrumentor):
    """The library's grpc.aio client instrumentor (it wraps `grpc.aio.insecure_channel` / `secure_channel`),
    installing the interceptors above in place of its own. `instrument(tracer_provider=...)` /
    `uninstrument()` as usual. Instrumentors are singletons: keep the instance that instrumented."""

    _instance = None  # its own singleton slot, not the parent class's

    def __init__(self, plan: SamplingPlan, filter_: Any = None) -> None:
        super().__init__(filter_=filter_)
        self._plan = plan

    @contextmanager
    def suspended(self) -> Iterator[None]:
        """Channels created inside the block get no interceptors: the library's wrappers of the channel
        factories are taken off and put back (creating channels happens at start, on one thread)."""
        wrapped = grpc.aio.insecure_channel, grpc.aio.secure_channel
        if self.is_instrumented_by_opentelemetry:
            grpc.aio.insecure_channel, grpc.aio.secure_channel = self._original_insecure, self._original_secure
        try:
            yield
        finally:
            grpc.aio.insecure_channel, grpc.aio.secure_channel = wrapped

    def unary_unary_interceptor(self, tracer_provider: TracerProvider | None) -> UnaryUnaryClientInterceptor:
        """The unary-unary interceptor this instrumentor installs on channels, for `TracedUnaryUnary`."""
        return UnaryUnaryClientInterceptor(self._plan, _library_tracer(tracer_provider), **self._options())

    def _options(self) -> dict[str, Any]:
        return {"filter_": self._filter, "request_hook": self._request_hook, "response_hook": self._response_hook}

    def _add_interceptors(self, tracer_provider: TracerProvider | None, kwargs: dict[str, Any]) -> dict[str, Any]:
        tracer = _library_tracer(tracer_provider)
        ours = [kind(self._plan, tracer, **self._options())
                for kind in (UnaryUnaryClientInterceptor, UnaryStreamClientInterceptor,
                             StreamUnaryClientInterceptor, StreamStreamClientInterceptor)]
        kwargs["interceptors"] = ours + list(kwargs.get("interceptors") or ())
        return kwargs


class SampledOnlyAioServerInterceptor(lib_server.OpenTelemetryAioServerInterceptor):
    """The library's aio server interceptor behind a sampling check (see the module docstring).

    grpc.aio runs an RPC's interceptors and then its handler in one task of its own, so a context made
    current here is the handler's, and goes away with the call: the fast path needs no wrapper around
    the handler (tests/integration/test_trace_sampling.py checks both halves of that)."""

    def __init__(self, tracer: trace.Tracer, plan: SamplingPlan, filter_: Callable[[Any], bool] | None = None,
                 starts_traces: bool = True) -> None:
        super().__init__(tracer, filter_=filter_)
        self._plan = plan
        self._starts_traces = starts_traces
        textmap = get_global_textmap()
        self._fields = frozenset(textmap.fields)  # metadata keys the propagators read
        self._w3c = any(isinstance(propagator, TraceContextTextMapPropagator)
                        for propagator in getattr(textmap, "_propagators", [textmap]))

    async def intercept_service(self, continuation: Callable[[Any], Awaitable[Handler]], details: Any) -> Handler:
        if not is_instrumentation_enabled() or (self._filter is not None and not self._filter(details)):
            return await continuation(details)
        caller = self._caller(details.invocation_metadata)
        parent = trace.get_current_span(caller).get_span_context() if caller is not None else INVALID_SPAN_CONTEXT
        handler = await continuation(details)
        if handler is None:
            return None
        if caller is not None and parent.is_valid:
            if self._plan.drops_child(parent):
                attach(caller)  # the caller's unsampled context, for the handler and the calls it makes
                return handler
        else:
            if not self._starts_traces:
                return handler  # a follower: no caller context, no trace
            decision = self._plan.root(caller or Context(), details.method, SpanKind.SERVER)
            if decision.span is not None:
                return handler  # a new trace the sampler drops: the call runs without any trace context
            reserve_trace_id(decision.trace_id)  # the library's span takes the id the decision was taken on

        async def found(_: Any) -> Handler:
            return handler

        return await super().intercept_service(found, details)  # the library opens the span when the call runs


    def _caller(self, metadata: Any) -> Context | None:
        """The caller's context, from the metadata keys the propagators read; None when the call carries
        none of them, as most calls to the router do (extract would return an empty context). A lone
        version-00 `traceparent`, what the router sends a modality service, is read here when the
        propagators include W3C trace context: the same context the propagators would build, for a
        third of the work."""
        fields = self._fields
        traceparent = None
        for entry in metadata or ():
            if entry.key in fields:
                if traceparent is not None or entry.key != "traceparent" or not self._w3c:
                    return extract({md.key: md.value for md in metadata})
                traceparent = entry.value
        if traceparent is None:
            return None
        return w3c_context(traceparent) or extract({"traceparent": traceparent})


_TRACEPARENT_00 = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")


def w3c_context(traceparent: str) -> Context | None:
    """The context W3C trace context's propagator extracts from a well-formed version-00 `traceparent`
    alone (a remote, non-recording span); None for anything else, which the propagator is left to judge."""
    match = _TRACEPARENT_00.fullmatch(traceparent)
    if match is None:
        return None
    trace_id, span_id = int(match[1], 16), int(match[2], 16)
    if not trace_id or not span_id:
        return None
    parent = SpanContext(trace_id, span_id, is_remote=True, trace_flags=TraceFlags(int(match[3], 16)))
    return trace.set_span_in_context(NonRecordingSpan(parent), Context())


def sampled_only_server_interceptor(provider: TracerProvider, plan: SamplingPlan,
                                    filter_: Callable[[Any], bool] | None = None,
                                    starts_traces: bool = True) -> SampledOnlyAioServerInterceptor:
    """The server interceptor with the tracer the library's `aio_server_interceptor` would use."""
    return SampledOnlyAioServerInterceptor(_library_tracer(provider), plan, filter_=filter_, starts_traces=starts_traces)


def _library_tracer(provider: TracerProvider | None) -> trace.Tracer:
    """The tracer the library's own interceptor factories use (its name, version and schema)."""
    return trace.get_tracer("opentelemetry.instrumentation.grpc", library_version, provider, schema_url=_SCHEMA_URL)
