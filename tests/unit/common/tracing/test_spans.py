"""Span helpers: a batch span is the child of its first sampled item and links to every item; an item
span can start a new trace linked to the current one; both do nothing while tracing is off. Under an
unsampled parent they create no span (when the sampler follows parents) but keep its context current."""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.sdk.trace import sampling
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanContext, TraceFlags

from services.common.tracing.spans import batch_parent, batch_span, current_span_context, current_trace_id, item_span
from services.common.tracing.telemetry import install_tracing, shutdown_tracing, tracer
from tests.stubs import InMemoryTracing


def context(trace_id: int, span_id: int, sampled: bool) -> SpanContext:
    return SpanContext(trace_id, span_id, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED if sampled else 0))


def test_batch_parent_is_the_first_sampled_origin() -> None:
    unsampled, sampled, invalid = context(1, 1, False), context(2, 2, True), trace.INVALID_SPAN_CONTEXT
    assert batch_parent([invalid, unsampled, sampled]) == sampled
    assert batch_parent([invalid, unsampled]) == unsampled
    assert batch_parent([invalid]) is None and batch_parent([]) is None


def test_helpers_do_nothing_while_tracing_is_off() -> None:
    assert not current_span_context().is_valid and current_trace_id() == ""
    with batch_span("batch m", [context(1, 1, True)]):
        pass
    with item_span("item", {"auditmesh.tenant": "acme"}) as span:
        assert span is None


def test_batch_span_links_every_distinct_item_and_follows_the_sampled_one() -> None:
    origins = [context(1, 11, False), context(2, 22, True), context(2, 22, True), context(3, 33, True)]
    with InMemoryTracing() as tracing:
        with batch_span("batch m", origins, {"auditmesh.model": "m"}):
            pass
        (span,) = tracing.named("batch m")
    assert span.parent is not None and (span.parent.trace_id, span.parent.span_id) == (2, 22)
    assert span.context is not None and span.context.trace_id == 2
    assert [(link.context.trace_id, link.context.span_id) for link in span.links] == [(1, 11), (2, 22), (3, 33)]
    assert span.attributes is not None
    assert span.attributes["auditmesh.model"] == "m" and span.attributes["auditmesh.batch_size"] == 4


def test_item_span_is_a_child_or_a_new_linked_trace() -> None:
    with InMemoryTracing() as tracing:
        with tracer().start_as_current_span("stream") as stream:
            assert current_trace_id() == trace.format_trace_id(stream.get_span_context().trace_id)
            with item_span("child", {"auditmesh.tenant": "acme"}):
                pass
            with item_span("own trace", {"auditmesh.tenant": "acme"}, new_trace=True):
                pass
        (child,) = tracing.named("child")
        (own,) = tracing.named("own trace")
    stream_context = stream.get_span_context()
    assert child.parent is not None and child.parent.span_id == stream_context.span_id
    assert own.parent is None and own.context is not None and own.context.trace_id != stream_context.trace_id
    assert [link.context.span_id for link in own.links] == [stream_context.span_id]


def test_no_span_under_an_unsampled_parent() -> None:
    unsampled = trace.NonRecordingSpan(context(7, 70, False))
    with InMemoryTracing() as tracing:
        with trace.use_span(unsampled):
            with item_span("skipped", {"auditmesh.tenant": "acme"}) as span:
                assert span is None and current_span_context().span_id == 70  # the caller's context still flows
        with batch_span("batch m", [context(7, 70, False), context(8, 80, False)]):
            pass
        assert tracing.spans() == []


def test_untraced_requests_get_no_item_or_batch_span_and_start_no_trace() -> None:
    with InMemoryTracing() as tracing:  # samples every new trace: only the router's interceptor starts one
        with item_span("item", {"auditmesh.tenant": "acme"}) as span:
            assert span is None and not current_span_context().is_valid
        with batch_span("batch m", [current_span_context(), current_span_context()]):
            assert not current_span_context().is_valid
        assert tracing.spans() == []


def test_an_unsampled_batch_runs_in_its_parent_context_so_its_calls_carry_the_decision_on() -> None:
    with InMemoryTracing() as tracing:
        with batch_span("batch m", [context(7, 70, False), context(8, 80, False)]):
            current = current_span_context()
        assert (current.trace_id, current.span_id) == (7, 70) and not current.trace_flags.sampled
        assert not current_span_context().is_valid  # restored after the batch
        assert tracing.spans() == []


def test_spans_under_an_unsampled_parent_when_the_sampler_ignores_parents() -> None:
    exporter = InMemorySpanExporter()
    install_tracing("auditmesh-test", exporter, sampler=sampling.ALWAYS_ON, batch=False)
    try:
        with trace.use_span(trace.NonRecordingSpan(context(7, 70, False))):
            with item_span("item", {"auditmesh.tenant": "acme"}) as span:
                assert span is not None
        with batch_span("batch m", [context(7, 70, False)]):
            pass
    finally:
        shutdown_tracing()
    assert sorted(span.name for span in exporter.get_finished_spans()) == ["batch m", "item"]
