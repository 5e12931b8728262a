"""Span helpers for the places where work changes hands: one item inside a call, many items in a batch.

A batch serves many requests, so it cannot be the child of all of them. Its span is the child of the
first *sampled* item (so with ratio sampling the batch is recorded whenever one of its items is) and
carries a span link to every item's span, which is how a trace viewer gets from any request to the
batch that served it. Callers capture `current_span_context()` when they queue an item and hand the
captured contexts to `batch_span` when the batch runs. Every helper returns at once while tracing is
off (`services.common.tracing.telemetry`), and creates no span under an unsampled parent when the sampler
would drop it anyway (`telemetry.drops_child`: the parent-based samplers, the default). A batch whose
items are all unsampled still runs in its parent's (unsampled) context, so the calls it makes carry
the "not sampled" decision on and the next service skips its spans too. An untraced request (no trace
context at all: a new trace the router's sampler dropped) gets no item span, and a batch of untraced
requests no batch span: neither starts a trace of its own, since traces start at the router's
server interceptor only.

Example::

    origin = current_span_context()                  # in the request handler, before queueing
    ...
    with batch_span("batch text_moderation", [origin, ...], {"auditmesh.model": "text_moderation"}):
        outputs = model.infer(inputs)
"""

from __future__ import annotations

from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Iterator, Mapping, Sequence

from opentelemetry import trace
from opentelemetry.context import Context, attach, detach
from opentelemetry.trace import Link, NonRecordingSpan, SpanContext, SpanKind
from opentelemetry.util.types import AttributeValue

from services.common.tracing.telemetry import drops_child, tracer, tracing_enabled

Attributes = Mapping[str, AttributeValue]


def current_span_context() -> SpanContext:
    """The active span's context (INVALID_SPAN_CONTEXT outside any span; cheap when tracing is off)."""
    return trace.get_current_span().get_span_context()


def current_trace_id() -> str:
    """The active trace id as 32 hex digits, or "" outside a (valid) span. For log lines."""
    context = current_span_context()
    return trace.format_trace_id(context.trace_id) if context.is_valid else ""


def batch_parent(origins: Sequence[SpanContext]) -> SpanContext | None:
    """The context a batch span should be the child of: the first sampled origin, else the first valid."""
    first_valid = None
    for origin in origins:
        if origin.is_valid:
            if origin.trace_flags.sampled:
                return origin
            first_valid = first_valid or origin
    return first_valid


@contextmanager
def batch_span(name: str, origins: Sequence[SpanContext], attributes: Attributes | None = None, *,
               carry_unsampled: bool = True) -> Iterator[None]:
    """A span around one batch, child of `batch_parent(origins)` and linked to each distinct origin.
    When no origin is sampled there is no span, and the first origin's (unsampled) context is made
    current for the calls the batch makes, unless `carry_unsampled` is False (a batch that calls no
    other service: nothing would read it)."""
    if not tracing_enabled():
        yield
        return
    parent = batch_parent(origins)
    if parent is None:  # untraced requests (new traces the router's sampler dropped): no span, no context
        yield
        return
    if drops_child(parent):  # no origin is sampled: only the context flows on
        if not carry_unsampled:
            yield
            return
        token = attach(trace.set_span_in_context(NonRecordingSpan(parent), Context()))
        try:
            yield
        finally:
            detach(token)
        return
    seen: set[tuple[int, int]] = set()
    links = []
    for origin in origins:
        key = (origin.trace_id, origin.span_id)
        if origin.is_valid and key not in seen:
            seen.add(key)
            links.append(Link(origin))
    context = trace.set_span_in_context(NonRecordingSpan(parent), Context())
    with tracer().start_as_current_span(name, context=context, kind=SpanKind.INTERNAL, links=links,
                                        attributes={**(attributes or {}), "auditmesh.batch_size": len(origins)}):
        yield


_NO_SPAN: AbstractContextManager[None] = nullcontext(None)  # reusable: enters to None, holds nothing


def item_span(name: str, attributes: Attributes, *, new_trace: bool = False) -> AbstractContextManager[trace.Span | None]:
    """A span for one item of a call (entering gives the span, or None when none is made: tracing off,
    or an unsampled parent the sampler follows). `new_trace` starts a new trace linked to the current
    span (one per message of a long-lived stream, so a stream is not one hours-long trace)."""
    if not tracing_enabled():
        return _NO_SPAN
    current = current_span_context()
    if new_trace:
        links = [Link(current)] if current.is_valid else []
        return tracer().start_as_current_span(name, context=Context(), links=links, attributes=attributes)
    if not current.is_valid or drops_child(current):  # an untraced request, or an unsampled parent
        return _NO_SPAN
    return tracer().start_as_current_span(name, attributes=attributes)
