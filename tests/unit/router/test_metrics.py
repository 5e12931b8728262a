"""Router metrics: bounded labels for reasons and shedding, one answered item, scheduler gauges, the active
policy versions (following hot swaps)."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from services.common.errors import QueueFullError
from services.common.errors import DeadlineExceededError, LimitExceededError, UnauthenticatedError
from services.common.metrics import new_registry
from services.router.admission import OverQuotaError
from services.router.fusion import CategoryVerdict, Degradation
from services.router.metrics import (PolicyVersionsCollector, RouterMetrics, SchedulerCollector, reason_kind,
                                     shed_reason)
from tests.stubs import open_control, policy_yaml


@pytest.mark.parametrize("reason, kind", [
    ("ocr service 127.0.0.1:1 failed: [StatusCode.UNAVAILABLE] failed to connect to all addresses", "unavailable"),
    ("deadline exceeded in the vision service", "deadline"),
    ("vision service returned a malformed 'SEXUAL' output", "malformed"),
    ("skipped under overload (ocr queue)", "overloaded"),
    ("text service x failed: something odd", "error"),
])
def test_reason_kind(reason: str, kind: str) -> None:
    assert reason_kind(reason) == kind


@pytest.mark.parametrize("error, reason", [
    (OverQuotaError("over quota", 0.5), "quota"),
    (QueueFullError("queue full"), "queue_full"),
    (DeadlineExceededError("shed early"), "deadline"),
    (LimitExceededError("text too long"), None),
    (UnauthenticatedError("no key"), None),
])
def test_shed_reason(error: BaseException, reason: str | None) -> None:
    assert shed_reason(error) == reason


def test_the_kinds_that_decided_categories_are_counted_by_subcategory_and_action() -> None:
    registry = new_registry("router", "0.1.0")
    metrics = RouterMetrics(registry)
    metrics.record_subcategories([CategoryVerdict("self_harm", 0.9, "medium", "review", "r", "self_harm/intent"),
                                  CategoryVerdict("hate", 0.1, "none", "allow", "")])
    metrics.record_subcategories([CategoryVerdict("self_harm", 0.9, "medium", "review", "r", "self_harm/intent")])
    value = registry.get_sample_value
    assert value("auditmesh_router_subcategory_decisions_total",
                 {"subcategory": "self_harm/intent", "action": "review"}) == 2
    assert value("auditmesh_router_subcategory_decisions_total", {"subcategory": "", "action": "allow"}) is None


def test_an_answered_item_and_a_refused_one() -> None:
    registry = new_registry("router", "0.1.0")
    metrics = RouterMetrics(registry)
    metrics.record_item("acme", "realtime", "OK", "block", {"text": 4.0, "fusion": 0.5}, 0.006)
    metrics.record_degradations([Degradation("ocr", "ocr service x failed: [StatusCode.UNAVAILABLE] ...", "fail_open")])
    metrics.record_refused("acme", "realtime", grpc.StatusCode.DEADLINE_EXCEEDED, DeadlineExceededError("shed"), 0.5)
    metrics.record_refused("unknown", "unknown", grpc.StatusCode.UNAUTHENTICATED, UnauthenticatedError("no key"))
    value = registry.get_sample_value
    assert value("auditmesh_router_requests_total", {"tenant": "acme", "qos_class": "realtime", "decision": "block",
                                                     "code": "OK"}) == 1
    assert value("auditmesh_router_requests_total", {"tenant": "acme", "qos_class": "realtime", "decision": "none",
                                                     "code": "DEADLINE_EXCEEDED"}) == 1
    assert value("auditmesh_router_requests_total", {"tenant": "unknown", "qos_class": "unknown", "decision": "none",
                                                     "code": "UNAUTHENTICATED"}) == 1
    assert value("auditmesh_router_request_duration_seconds_count", {"tenant": "acme", "qos_class": "realtime"}) == 2
    assert value("auditmesh_router_stage_duration_seconds_sum", {"qos_class": "realtime", "stage": "text"}) == 0.004
    assert value("auditmesh_router_degraded_total", {"stage": "ocr", "reason": "unavailable", "handling": "fail_open"}) == 1
    assert value("auditmesh_router_shed_total", {"qos_class": "realtime", "reason": "deadline"}) == 1


def test_versions_are_info_metrics() -> None:
    registry = new_registry("router", "0.1.0")
    metrics = RouterMetrics(registry)
    registry.register(PolicyVersionsCollector(lambda: {"default": "3"}))
    metrics.describe_upstream("text", [("text_moderation", "1"), ("toxicity_en", "1.9.1")])
    assert registry.get_sample_value("auditmesh_router_policy_info", {"policy": "default", "version": "3"}) == 1
    assert registry.get_sample_value("auditmesh_router_upstream_model_info",
                                     {"upstream": "text", "model": "toxicity_en", "version": "1.9.1"}) == 1


def policy_info(registry: CollectorRegistry) -> set[tuple[str, str]]:
    """The (policy, version) pairs `auditmesh_router_policy_info` exposes, as a scrape parses them."""
    return {(sample.labels["policy"], sample.labels["version"])
            for family in text_string_to_metric_families(generate_latest(registry).decode())
            for sample in family.samples if sample.name == "auditmesh_router_policy_info" and sample.value == 1}


def test_policy_info_follows_activation_and_rollback(tmp_path: Path) -> None:
    """Regression: the metric was set once at start and kept naming the first version after a hot swap."""
    control, _ = open_control(tmp_path)
    registry = new_registry("router", "0.1.0")
    registry.register(PolicyVersionsCollector(lambda: control.runtime.snapshot.policy_versions()))
    assert policy_info(registry) == {("default", "1"), ("strict", "1")}
    control.put("policy", policy_yaml("default", "2", hate_block=0.8), name="default", author="ops")
    assert policy_info(registry) == {("default", "1"), ("strict", "1")}  # stored, not active yet
    control.activate("policy", "default", "2", author="ops")
    assert policy_info(registry) == {("default", "2"), ("strict", "1")}
    control.activate("policy", "strict", "1", "b", author="ops")  # a tenant pointer: the global version stays
    assert policy_info(registry) == {("default", "2"), ("strict", "1")}
    control.rollback("policy", "default", author="ops")
    assert policy_info(registry) == {("default", "1"), ("strict", "1")}


class FakeScheduler:
    def __init__(self, depth: int, shed: int) -> None:
        self.depth, self.shed_count = depth, shed

    @property
    def queue_depth(self) -> int:
        return self.depth


def test_scheduler_collector_reads_at_scrape_time() -> None:
    registry = new_registry("router", "0.1.0")
    text = FakeScheduler(5, 2)
    registry.register(SchedulerCollector({"text": text}))
    assert registry.get_sample_value("auditmesh_router_queue_depth", {"upstream": "text"}) == 5
    text.depth, text.shed_count = 0, 3
    assert registry.get_sample_value("auditmesh_router_queue_depth", {"upstream": "text"}) == 0
    assert registry.get_sample_value("auditmesh_router_scheduler_shed_total", {"upstream": "text"}) == 3


def test_the_in_flight_gauge_of_a_class_is_one_child_reused() -> None:
    registry = new_registry("router", "0.1.0")
    metrics = RouterMetrics(registry)
    gauge = metrics.in_flight_for("realtime")
    assert metrics.in_flight_for("realtime") is gauge
    gauge.inc()
    gauge.inc()
    gauge.dec()
    assert registry.get_sample_value("auditmesh_router_in_flight_items", {"qos_class": "realtime"}) == 1
    metrics.record_item("acme", "realtime", "OK", "allow", {"text": 1.0}, 0.001)
    metrics.record_item("acme", "realtime", "OK", "allow", {"text": 3.0}, 0.001)
    assert registry.get_sample_value("auditmesh_router_stage_duration_seconds_count",
                                     {"qos_class": "realtime", "stage": "text"}) == 2
