"""Tracing set-up: settings from OTEL_* variables, off by default (no interceptor, no instrumented
channel), on and off again with an explicit exporter; uninstrumented channels and the calls traced one by one
over them."""

from __future__ import annotations

import grpc
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import sampling
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from services.common.tracing.telemetry import (TracingSettings, _traced, install_tracing, server_interceptors,
                                       setup_tracing, shutdown_tracing, tracer, tracing_enabled, uninstrumented_channels,
                                       traced_unary_unary)
from services.common.tracing.trace_interceptors import TracedUnaryUnary


def test_tracing_is_off_by_default() -> None:
    settings = TracingSettings.from_env("router", {})
    assert settings.exporter == "none" and settings.service_name == "auditmesh-router"
    assert setup_tracing("router", {}) is None
    assert not tracing_enabled() and server_interceptors() == []


@pytest.mark.parametrize("env, exporter", [
    ({"OTEL_TRACES_EXPORTER": "console"}, "console"),
    ({"OTEL_TRACES_EXPORTER": "OTLP"}, "otlp"),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317"}, "otlp"),
    ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4317"}, "otlp"),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317", "OTEL_TRACES_EXPORTER": "none"}, "none"),
    ({"OTEL_TRACES_EXPORTER": "console", "OTEL_SDK_DISABLED": "true"}, "none"),
])
def test_exporter_from_env(env: dict[str, str], exporter: str) -> None:
    assert TracingSettings.from_env("text", env).exporter == exporter


def test_service_name_and_ratio_sampler_from_env() -> None:
    settings = TracingSettings.from_env("ocr", {"OTEL_SERVICE_NAME": "ocr-eu", "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
                                                "OTEL_TRACES_SAMPLER_ARG": "0.01"})
    assert settings.service_name == "ocr-eu" and settings.sampler_arg == 0.01
    sampler = settings.make_sampler()
    assert isinstance(sampler, sampling.ParentBased)
    assert "TraceIdRatioBased{0.01}" in sampler.get_description()  # type: ignore[no-untyped-call]
    assert TracingSettings.from_env("ocr", {"OTEL_TRACES_SAMPLER": "always_off"}).make_sampler() is sampling.ALWAYS_OFF


@pytest.mark.parametrize("env, variable", [
    ({"OTEL_TRACES_EXPORTER": "jaeger"}, "OTEL_TRACES_EXPORTER"),
    ({"OTEL_TRACES_SAMPLER": "sometimes"}, "OTEL_TRACES_SAMPLER"),
    ({"OTEL_TRACES_SAMPLER_ARG": "1%"}, "OTEL_TRACES_SAMPLER_ARG"),
    ({"OTEL_TRACES_SAMPLER_ARG": "2"}, "OTEL_TRACES_SAMPLER_ARG"),
])
def test_bad_values_name_the_variable(env: dict[str, str], variable: str) -> None:
    with pytest.raises(ValueError, match=variable):
        TracingSettings.from_env("router", env)


def test_install_instruments_channels_and_servers_and_shutdown_undoes_it() -> None:
    plain_channel = grpc.aio.insecure_channel
    exporter = InMemorySpanExporter()
    install_tracing("auditmesh-test", exporter, batch=False)
    try:
        assert tracing_enabled()
        assert grpc.aio.insecure_channel is not plain_channel  # the aio client instrumentor wraps channel creation
        assert len(server_interceptors()) == 1
        with pytest.raises(RuntimeError, match="already on"):
            install_tracing("again", exporter)
        with tracer().start_as_current_span("work"):
            pass
        assert [span.name for span in exporter.get_finished_spans()] == ["work"]
        assert exporter.get_finished_spans()[0].resource.attributes["service.name"] == "auditmesh-test"
    finally:
        shutdown_tracing()
    assert not tracing_enabled() and server_interceptors() == []
    assert grpc.aio.insecure_channel is plain_channel
    shutdown_tracing()  # a second call is harmless


@pytest.mark.parametrize("method, traced", [
    ("/auditmesh.v1.ModerationService/Moderate", True), ("/inference.GRPCInferenceService/ModelInfer", True),
    ("/grpc.health.v1.Health/Check", False), ("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", False),
    (b"/grpc.health.v1.Health/Watch", False),
])
def test_health_and_reflection_are_not_traced(method: str | bytes, traced: bool) -> None:
    class Details:
        def __init__(self) -> None:
            self.method = method

    assert _traced(Details()) is traced


def test_uninstrumented_channels_take_the_instrumentor_off_for_a_while() -> None:
    plain_channel = grpc.aio.insecure_channel
    with uninstrumented_channels():  # tracing off: nothing to take off
        assert grpc.aio.insecure_channel is plain_channel
    install_tracing("auditmesh-test", InMemorySpanExporter(), batch=False)
    try:
        instrumented = grpc.aio.insecure_channel
        with uninstrumented_channels():
            assert grpc.aio.insecure_channel is plain_channel
        assert grpc.aio.insecure_channel is instrumented
    finally:
        shutdown_tracing()


def test_traced_unary_unary_wraps_a_call_only_while_tracing_is_on() -> None:
    def call(request: bytes, **options: object) -> bytes:
        return request

    assert traced_unary_unary(call, "/inference.GRPCInferenceService/ModelInfer") is call  # tracing off
    install_tracing("auditmesh-test", InMemorySpanExporter(), batch=False)
    try:
        assert isinstance(traced_unary_unary(call, "/inference.GRPCInferenceService/ModelInfer"), TracedUnaryUnary)
    finally:
        shutdown_tracing()
    assert traced_unary_unary(call, "/inference.GRPCInferenceService/ModelInfer") is call
