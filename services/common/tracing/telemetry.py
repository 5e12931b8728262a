"""Tracing set-up: OpenTelemetry from the standard OTEL_* environment variables, off by default.

Read once at start (`setup_tracing`):

- `OTEL_TRACES_EXPORTER`: `otlp` (OTLP over gRPC; endpoint, headers, TLS from the usual
  `OTEL_EXPORTER_OTLP_[TRACES_]*` variables), `console` (JSON spans on stdout) or `none`. Unset means
  `none`, unless `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set (then
  `otlp`). The specification's default is `otlp`; here tracing stays off until asked for.
- `OTEL_SDK_DISABLED=true` turns it off whatever else is set.
- `OTEL_TRACES_SAMPLER` / `OTEL_TRACES_SAMPLER_ARG`: `parentbased_traceidratio` with `0.01` samples 1%
  of new traces and follows the caller's decision otherwise. Default `parentbased_always_on`.
- `OTEL_SERVICE_NAME` (default `auditmesh-<service>`), `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_BSP_*`.

Traces start at the router: its server interceptor takes the sampler's decision for a request that
arrives without trace context, and a request it drops runs with no trace context at all (nothing is
made current, no span helper does anything, nothing is sent upstream). The modality services start no
traces (`setup_tracing(..., starts_traces=False)`): they follow a caller's sampled or unsampled
`traceparent`, and do not trace a call without one.

Off costs nothing: no SDK is loaded, no interceptor wraps any call, and `tracing_enabled()` is False
so span helpers (`services.common.tracing.spans`) return at once. On, the grpc.aio client instrumentor is
installed process-wide (the router's tritonclient channels then carry W3C `traceparent` metadata over
the KServe v2 calls) and `server_interceptors()` gives `GrpcService` the aio server interceptor
(health checks and reflection are not traced). Both are opentelemetry-instrumentation-grpc's, behind
a sampling check (`services.common.tracing.trace_interceptors`): a call the sampler will drop skips the
library's span work and only carries its (unsampled) context on, which is most of what keeps tracing
at 1% sampling cheap. The router's upstream clients go one step further (`services.router.upstream_client`):
their channel is made without interceptors (`uninstrumented_channels`) and each KServe call goes through
the same client interceptor in the caller's task (`traced_unary_unary`), since grpc.aio runs the
interceptors of every call on an instrumented channel in a task of its own.

Example::

    setup_tracing("router")        # in main(), before any channel or server is created
    ...
    shutdown_tracing()             # flushes buffered spans
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator, Literal, Mapping

import grpc
from opentelemetry import trace

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.sdk.trace.sampling import Sampler
    from opentelemetry.trace import SpanContext

    from services.common.tracing.trace_interceptors import SampledOnlyAioClientInstrumentor
    from services.common.tracing.trace_sampling import SamplingPlan

Exporter = Literal["none", "console", "otlp"]
_EXPORTERS: tuple[Exporter, ...] = ("none", "console", "otlp")
_SAMPLERS = ("always_on", "always_off", "traceidratio", "parentbased_always_on", "parentbased_always_off",
             "parentbased_traceidratio")
_UNTRACED_PREFIXES = ("/grpc.health.v1.Health/", "/grpc.reflection.")
TRACER_NAME = "auditmesh"


@dataclass(frozen=True)
class TracingSettings:
    """What `setup_tracing` reads from the environment (see the module docstring)."""

    exporter: Exporter = "none"
    service_name: str = "auditmesh"
    sampler: str = "parentbased_always_on"
    sampler_arg: float = 1.0

    def __post_init__(self) -> None:
        if self.exporter not in _EXPORTERS:
            raise ValueError(f"OTEL_TRACES_EXPORTER must be one of {list(_EXPORTERS)}, got {self.exporter!r}")
        if self.sampler not in _SAMPLERS:
            raise ValueError(f"OTEL_TRACES_SAMPLER must be one of {list(_SAMPLERS)}, got {self.sampler!r}")
        if not 0.0 <= self.sampler_arg <= 1.0:
            raise ValueError(f"OTEL_TRACES_SAMPLER_ARG must be a ratio in [0, 1], got {self.sampler_arg}")

    @classmethod
    def from_env(cls, service: str, env: Mapping[str, str]) -> TracingSettings:
        """Settings for `service` from `env` (normally os.environ)."""
        exporter = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
        if not exporter:
            otlp_set = env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            exporter = "otlp" if otlp_set else "none"
        if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
            exporter = "none"
        arg = env.get("OTEL_TRACES_SAMPLER_ARG", "").strip() or "1.0"
        try:
            ratio = float(arg)
        except ValueError:
            raise ValueError(f"OTEL_TRACES_SAMPLER_ARG must be a number, got {arg!r}") from None
        return cls(exporter,  # type: ignore[arg-type]  # validated in __post_init__
                   env.get("OTEL_SERVICE_NAME") or f"auditmesh-{service}",
                   env.get("OTEL_TRACES_SAMPLER", "").strip().lower() or "parentbased_always_on", ratio)

    def make_sampler(self) -> Sampler:
        """The SDK sampler these settings name."""
        from opentelemetry.sdk.trace import sampling

        base = self.sampler.removeprefix("parentbased_")
        root: Sampler = (sampling.ALWAYS_ON if base == "always_on" else sampling.ALWAYS_OFF if base == "always_off"
                         else sampling.TraceIdRatioBased(self.sampler_arg))
        return sampling.ParentBased(root) if self.sampler.startswith("parentbased_") else root


@dataclass
class _State:
    provider: TracerProvider | None = None
    tracer: trace.Tracer | None = None
    plan: SamplingPlan | None = None
    instrumentor: SampledOnlyAioClientInstrumentor | None = None
    starts_traces: bool = True


_state = _State()


def tracing_enabled() -> bool:
    """True once `setup_tracing` / `install_tracing` turned tracing on in this process."""
    return _state.provider is not None


def tracer() -> trace.Tracer:
    """The auditmesh tracer (a no-op tracer while tracing is off)."""
    return _state.tracer if _state.tracer is not None else trace.NoOpTracer()


def drops_child(parent: SpanContext) -> bool:
    """True when tracing is on and a span under `parent` would not be sampled (a valid, unsampled parent
    and a sampler that follows its parent, as every `parentbased_*` one does): span helpers skip it."""
    plan = _state.plan
    return plan is not None and plan.drops_child(parent)


def traced_unary_unary(call: Any, method: str) -> Any:
    """`call`, a unary-unary multicallable of a channel made inside `uninstrumented_channels`, traced call
    by call in the caller's task (`trace_interceptors.TracedUnaryUnary`): an unsampled call only carries
    its context (and so its "not sampled" decision) on, a sampled one gets the library's CLIENT span.
    `call` itself while tracing is off. `method` is the full method name, "/package.Service/Method".

    Example::

        stub.ModelInfer = traced_unary_unary(stub.ModelInfer, "/inference.GRPCInferenceService/ModelInfer")
    """
    instrumentor = _state.instrumentor
    if instrumentor is None:
        return call
    from services.common.tracing.trace_interceptors import TracedUnaryUnary

    return TracedUnaryUnary(call, method, instrumentor.unary_unary_interceptor(_state.provider))


@contextmanager
def uninstrumented_channels() -> Iterator[None]:
    """grpc.aio channels created inside the block get no tracing interceptors (nothing changes while
    tracing is off): for a channel whose calls are traced one by one (`traced_unary_unary`), since an
    intercepted grpc.aio call runs its interceptors in a task of its own, which costs more than the
    interceptor's work when the call is not sampled; and for a test's own channel."""
    instrumentor = _state.instrumentor
    if instrumentor is None:
        yield
        return
    with instrumentor.suspended():
        yield


def setup_tracing(service: str, env: Mapping[str, str] | None = None, *, starts_traces: bool = True) -> TracerProvider | None:
    """Turn tracing on when the environment asks for it; returns the provider, or None when off.

    `starts_traces=False` (the modality services): a call that carries no trace context is not traced
    here; the service follows its callers' decisions only (see `install_tracing`).
    Call before any gRPC channel or server is created: channels made earlier are not instrumented.
    """
    settings = TracingSettings.from_env(service, os.environ if env is None else env)
    if settings.exporter == "none":
        return None
    provider = install_tracing(settings.service_name, _exporter(settings.exporter), sampler=settings.make_sampler(),
                               starts_traces=starts_traces)
    trace.set_tracer_provider(provider)  # for any library that asks the global API
    return provider


def _exporter(kind: Exporter) -> SpanExporter:
    if kind == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter
        return ConsoleSpanExporter()
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    return OTLPSpanExporter()


def install_tracing(service_name: str, exporter: SpanExporter, *, sampler: Sampler | None = None,
                    batch: bool = True, starts_traces: bool = True) -> TracerProvider:
    """Turn tracing on with an explicit exporter (tests pass an InMemorySpanExporter, batch=False).
    The sampler defaults to parentbased_always_on (the environment is not read here).

    `starts_traces`: whether a served call without trace context may start a trace (the sampler's
    root decision); False for services behind the router, which follow the caller's decision only.

    Does not touch the global tracer provider; `shutdown_tracing` undoes everything this does.
    """
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    from opentelemetry.sdk.trace.sampling import ALWAYS_ON, ParentBased

    from services.common.tracing.trace_interceptors import SampledOnlyAioClientInstrumentor
    from services.common.tracing.trace_sampling import ReservingIdGenerator, SamplingPlan

    if _state.provider is not None:
        raise RuntimeError("tracing is already on in this process; call shutdown_tracing() first")
    ids = ReservingIdGenerator()
    provider = TracerProvider(sampler=sampler or ParentBased(ALWAYS_ON), id_generator=ids,
                              resource=Resource.create({"service.name": service_name}))
    provider.add_span_processor(BatchSpanProcessor(exporter) if batch else SimpleSpanProcessor(exporter))
    plan = SamplingPlan(provider.sampler, ids)
    instrumentor = SampledOnlyAioClientInstrumentor(plan)
    instrumentor.instrument(tracer_provider=provider)
    _state.provider, _state.tracer, _state.plan = provider, provider.get_tracer(TRACER_NAME), plan
    _state.instrumentor, _state.starts_traces = instrumentor, starts_traces
    return provider


def shutdown_tracing() -> None:
    """Flush and stop tracing; later channels and servers are created without instrumentation."""
    provider, instrumentor = _state.provider, _state.instrumentor
    _state.provider, _state.tracer, _state.plan, _state.instrumentor = None, None, None, None
    _state.starts_traces = True
    if instrumentor is not None:
        instrumentor.uninstrument()
    if provider is not None:
        provider.shutdown()


def server_interceptors() -> list[grpc.aio.ServerInterceptor]:
    """The aio server interceptor that opens a span per sampled call (empty while tracing is off)."""
    provider, plan = _state.provider, _state.plan
    if provider is None or plan is None:
        return []
    from services.common.tracing.trace_interceptors import sampled_only_server_interceptor

    return [sampled_only_server_interceptor(provider, plan, filter_=_traced, starts_traces=_state.starts_traces)]


def _traced(details: grpc.HandlerCallDetails) -> bool:
    """False for health checks and reflection. (The library's own filters parse the method name with
    os.path and isinstance checks against a Protocol on every call: measurably slower.)"""
    method = details.method
    name = method.decode() if isinstance(method, bytes) else str(method)
    return not name.startswith(_UNTRACED_PREFIXES)
