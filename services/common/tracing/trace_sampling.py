"""Sampling decisions taken before any span exists, so that work the sampler would drop is never done.

At 1% sampling, 99% of calls end in a span that records nothing; the cost of tracing is then what the
instrumentation does around that empty span (attributes, peer parsing, metadata copies, a wrapped
servicer context). `SamplingPlan` answers the two questions the fast paths in
`services.common.tracing.trace_interceptors` and `services.common.tracing.spans` ask:

- `drops_child(parent)`: a span under this (valid, unsampled) parent would be dropped, because the
  sampler follows its parent's decision (every `parentbased_*` sampler; probed once at start, so an
  `always_on` sampler, which samples children of unsampled parents, never takes the fast path);
- `root(context, name, kind)`: the sampler's decision for a new trace, taken on a trace id drawn here.
  When it says "sample", the id is reserved (`ReservingIdGenerator`) for the span the instrumentation
  then starts in that context, so the SDK draws the same id and its sampler reaches the same decision:
  the configured ratio holds, and the trace is the one we decided on.

Example::

    plan = SamplingPlan(provider.sampler, ids)          # ids: the provider's ReservingIdGenerator
    decision = plan.root(context, "/pkg.Service/Method", SpanKind.SERVER)
    if decision.span is not None:                        # dropped: run in its non-recording context
        ...
    else:
        reserve_trace_id(decision.trace_id)              # sampled: the instrumentation starts the span
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import NamedTuple

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON, Decision, ParentBased, Sampler, TraceIdRatioBased
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, TraceFlags

#: A trace id the next root span started in this context must use (0: none).
_reserved: ContextVar[int] = ContextVar("auditmesh_reserved_trace_id", default=0)


class ReservingIdGenerator(RandomIdGenerator):
    """Random ids, except that a trace id reserved with `reserve_trace_id` is used (once) by the next
    root span started in that context."""

    def generate_trace_id(self) -> int:
        reserved = _reserved.get()
        if reserved:
            _reserved.set(0)
            return reserved
        return super().generate_trace_id()


def reserve_trace_id(trace_id: int) -> None:
    """The next root span started in the current context (for a gRPC call: its task) takes `trace_id`."""
    _reserved.set(trace_id)


class RootDecision(NamedTuple):
    """The sampler's decision for a new trace: `span` is its non-recording span when dropped, else None
    (sampled: the caller reserves `trace_id` and lets the instrumentation start the span). A tuple: it
    is made for every new trace."""

    trace_id: int
    span: NonRecordingSpan | None


class SamplingPlan:
    """See the module docstring."""

    def __init__(self, sampler: Sampler, ids: ReservingIdGenerator) -> None:
        self.sampler = sampler
        self.ids = ids
        self.follows_parent = all(_drops_under_unsampled(sampler, remote) for remote in (True, False))
        self._bound = _root_bound(sampler)
        self._random_flag = TraceFlags.RANDOM_TRACE_ID if ids.is_trace_id_random() else TraceFlags.DEFAULT

    def drops_child(self, parent: SpanContext) -> bool:
        """True when a span under `parent` would be dropped: a valid, unsampled parent that the sampler follows."""
        return self.follows_parent and parent.is_valid and not parent.trace_flags.sampled

    def root(self, context: Context | None, name: str, kind: SpanKind) -> RootDecision:
        """Decide a new trace the way the SDK's tracer would (same sampler, same kind of trace id)."""
        trace_id = self.ids.generate_trace_id()
        if self._bound is not None:  # a standard sampler: its rule, without building its result
            if trace_id & TraceIdRatioBased.TRACE_ID_LIMIT < self._bound:
                return RootDecision(trace_id, None)
            trace_state = None
        else:
            result = self.sampler.should_sample(context, trace_id, name, kind)
            if result.decision is not Decision.DROP:
                return RootDecision(trace_id, None)
            trace_state = result.trace_state
        span_context = SpanContext(trace_id, self.ids.generate_span_id(), is_remote=False,
                                   trace_flags=TraceFlags(self._random_flag), trace_state=trace_state)
        return RootDecision(trace_id, NonRecordingSpan(span_context))


def _drops_under_unsampled(sampler: Sampler, remote: bool) -> bool:
    """Whether `sampler` drops a child of an unsampled parent (probed: samplers are opaque)."""
    parent = NonRecordingSpan(SpanContext(1, 1, is_remote=remote, trace_flags=TraceFlags(TraceFlags.DEFAULT)))
    result = sampler.should_sample(trace.set_span_in_context(parent), 1, "probe", SpanKind.INTERNAL)
    return result.decision is Decision.DROP


def _root_bound(sampler: Sampler) -> int | None:
    """For the samplers `OTEL_TRACES_SAMPLER` names, the bound a new trace's id (low 64 bits) must be
    under to be sampled, the rule TraceIdRatioBased applies (always_on: every id, always_off: none);
    None for any other sampler, which is then asked. Saves the sampler call and its result object on
    every new trace: about a third of the cost of an unsampled call at the router."""
    root = getattr(sampler, "_root", None) if isinstance(sampler, ParentBased) else sampler
    if isinstance(root, TraceIdRatioBased):
        return root.bound
    if root is ALWAYS_ON:
        return TraceIdRatioBased.TRACE_ID_LIMIT + 1
    if root is ALWAYS_OFF:
        return 0
    return None
