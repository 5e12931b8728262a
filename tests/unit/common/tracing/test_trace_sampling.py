"""Sampling decided before any span exists: which samplers follow an unsampled parent, a new trace's
decision, and the reserved trace id that makes the SDK reach the same decision."""

from __future__ import annotations

import asyncio

import pytest
from opentelemetry.sdk.trace import sampling
from opentelemetry.trace import SpanContext, SpanKind, TraceFlags

from services.common.tracing.trace_sampling import ReservingIdGenerator, SamplingPlan, reserve_trace_id


def context(sampled: bool) -> SpanContext:
    return SpanContext(7, 70, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED if sampled else 0))


@pytest.mark.parametrize("sampler, follows", [
    (sampling.ParentBased(sampling.TraceIdRatioBased(0.01)), True),
    (sampling.ParentBased(sampling.ALWAYS_ON), True),
    (sampling.ALWAYS_OFF, True),  # drops everything, so children of unsampled parents too
    (sampling.ALWAYS_ON, False),
    (sampling.TraceIdRatioBased(0.5), False),
    (sampling.ParentBased(sampling.ALWAYS_ON, remote_parent_not_sampled=sampling.ALWAYS_ON), False),
])
def test_only_samplers_that_follow_an_unsampled_parent_skip_its_children(sampler: sampling.Sampler,
                                                                          follows: bool) -> None:
    plan = SamplingPlan(sampler, ReservingIdGenerator())
    assert plan.follows_parent is follows
    assert plan.drops_child(context(sampled=False)) is follows
    assert not plan.drops_child(context(sampled=True))
    assert not plan.drops_child(SpanContext(0, 0, is_remote=False))  # no parent: a new trace, the sampler decides


def test_a_dropped_new_trace_gets_a_non_recording_span_with_a_fresh_trace_id() -> None:
    plan = SamplingPlan(sampling.ParentBased(sampling.ALWAYS_OFF), ReservingIdGenerator())
    first, second = (plan.root(None, "/pkg.S/M", SpanKind.SERVER) for _ in range(2))
    assert first.span is not None and second.span is not None
    span_context = first.span.get_span_context()
    assert span_context.is_valid and not span_context.trace_flags.sampled and not first.span.is_recording()
    assert span_context.trace_id == first.trace_id != second.trace_id


def test_a_sampled_new_trace_leaves_the_span_to_the_instrumentation() -> None:
    decision = SamplingPlan(sampling.ALWAYS_ON, ReservingIdGenerator()).root(None, "/pkg.S/M", SpanKind.SERVER)
    assert decision.span is None and decision.trace_id


async def test_a_reserved_trace_id_is_used_once_in_its_task() -> None:
    ids = ReservingIdGenerator()

    async def call() -> tuple[int, int]:  # a gRPC call: a task of its own
        reserve_trace_id(42)
        return ids.generate_trace_id(), ids.generate_trace_id()

    first, second = await asyncio.create_task(call())
    assert first == 42 and second != 42
    assert ids.generate_trace_id() != 42  # not outside the task


class Custom(sampling.Sampler):
    """Samples new traces with an odd id: a sampler the plan knows nothing about."""

    def should_sample(self, parent_context: object, trace_id: int, name: str, kind: object = None,
                      attributes: object = None, links: object = None, trace_state: object = None) -> sampling.SamplingResult:
        return sampling.SamplingResult(sampling.Decision.RECORD_AND_SAMPLE if trace_id % 2 else sampling.Decision.DROP)

    def get_description(self) -> str:
        return "Custom"


@pytest.mark.parametrize("sampler", [
    sampling.ParentBased(sampling.TraceIdRatioBased(0.3)), sampling.TraceIdRatioBased(0.7),
    sampling.ParentBased(sampling.ALWAYS_ON), sampling.ParentBased(sampling.ALWAYS_OFF), sampling.ALWAYS_ON,
    sampling.ParentBased(Custom()),
])
def test_a_new_trace_gets_the_decision_the_sampler_would_take(sampler: sampling.Sampler) -> None:
    plan = SamplingPlan(sampler, ReservingIdGenerator())
    decisions = [plan.root(None, "/pkg.S/M", SpanKind.SERVER) for _ in range(400)]
    for decision in decisions:
        result = sampler.should_sample(None, decision.trace_id, "/pkg.S/M", SpanKind.SERVER)
        expected = result.decision is sampling.Decision.RECORD_AND_SAMPLE
        assert (decision.span is None) is expected
