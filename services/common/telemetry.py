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

Off costs nothing: no SDK is loaded, no interceptor wraps any call, and `tracing_enabled()` is False
so span helpers (`services.common.spans`) return at once. On, the grpc.aio client instrumentor is
installed process-wide (the router's tritonclient channels then carry W3C `traceparent` metadata over
the KServe v2 calls) and `server_interceptors()` gives `GrpcService` the aio server interceptor
(health checks and reflection are not traced).

Example::

    setup_tracing("router")        # in main(), before any channel or server is created
    ...
    shutdown_tracing()             # flushes buffered spans
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Mapping

import grpc
from opentelemetry import trace

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.sdk.trace.sampling import Sampler

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


_state = _State()


def tracing_enabled() -> bool:
    """True once `setup_tracing` / `install_tracing` turned tracing on in this process."""
    return _state.provider is not None


def tracer() -> trace.Tracer:
    """The auditmesh tracer (a no-op tracer while tracing is off)."""
    return _state.tracer if _state.tracer is not None else trace.NoOpTracer()


def setup_tracing(service: str, env: Mapping[str, str] | None = None) -> TracerProvider | None:
    """Turn tracing on when the environment asks for it; returns the provider, or None when off.

    Call before any gRPC channel or server is created: channels made earlier are not instrumented.
    """
    settings = TracingSettings.from_env(service, os.environ if env is None else env)
    if settings.exporter == "none":
        return None
    provider = install_tracing(settings.service_name, _exporter(settings.exporter), sampler=settings.make_sampler())
    trace.set_tracer_provider(provider)  # for any library that asks the global API
    return provider


def _exporter(kind: Exporter) -> SpanExporter:
    if kind == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter
        return ConsoleSpanExporter()
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    return OTLPSpanExporter()


def install_tracing(service_name: str, exporter: SpanExporter, *, sampler: Sampler | None = None,
                    batch: bool = True) -> TracerProvider:
    """Turn tracing on with an explicit exporter (tests pass an InMemorySpanExporter, batch=False).
    The sampler defaults to parentbased_always_on (the environment is not read here).

    Does not touch the global tracer provider; `shutdown_tracing` undoes everything this does.
    """
    from opentelemetry.instrumentation.grpc import GrpcAioInstrumentorClient
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    from opentelemetry.sdk.trace.sampling import ALWAYS_ON, ParentBased

    if _state.provider is not None:
        raise RuntimeError("tracing is already on in this process; call shutdown_tracing() first")
    provider = TracerProvider(sampler=sampler or ParentBased(ALWAYS_ON),
                              resource=Resource.create({"service.name": service_name}))
    provider.add_span_processor(BatchSpanProcessor(exporter) if batch else SimpleSpanProcessor(exporter))
    GrpcAioInstrumentorClient().instrument(tracer_provider=provider)  # type: ignore[no-untyped-call]
    _state.provider, _state.tracer = provider, provider.get_tracer(TRACER_NAME)
    return provider


def shutdown_tracing() -> None:
    """Flush and stop tracing; later channels and servers are created without instrumentation."""
    from opentelemetry.instrumentation.grpc import GrpcAioInstrumentorClient

    provider, _state.provider, _state.tracer = _state.provider, None, None
    if provider is None:
        return
    GrpcAioInstrumentorClient().uninstrument()  # type: ignore[no-untyped-call]
    provider.shutdown()


def server_interceptors() -> list[grpc.aio.ServerInterceptor]:
    """The aio server interceptor that opens a span per call (empty while tracing is off)."""
    provider = _state.provider
    if provider is None:
        return []
    from opentelemetry.instrumentation.grpc import aio_server_interceptor

    interceptor: grpc.aio.ServerInterceptor = aio_server_interceptor(  # type: ignore[no-untyped-call]
        tracer_provider=provider, filter_=_traced)
    return [interceptor]


def _traced(details: grpc.HandlerCallDetails) -> bool:
    """False for health checks and reflection. (The library's own filters parse the method name with
    os.path and isinstance checks against a Protocol on every call: measurably slower.)"""
    method = details.method
    name = method.decode() if isinstance(method, bytes) else str(method)
    return not name.startswith(_UNTRACED_PREFIXES)
