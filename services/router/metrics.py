"""The router's Prometheus metrics, and how one answered item is recorded. No gRPC servicer code here.

Labels stay bounded: tenants and QoS classes come from the tenants file (an unauthenticated call is
`tenant="unknown"`), stages from the pipeline, codes from grpc.StatusCode, and a degradation's free-text
reason is reduced to a kind (`reason_kind`). Never a request's content or its ids.

Example::

    metrics = RouterMetrics(new_registry("router", "0.1.0"))
    metrics.record_item("acme", "realtime", "OK", "allow", {"text": 3.1, "fusion": 0.2}, 0.0042)
    # auditmesh_router_requests_total{tenant="acme",qos_class="realtime",decision="allow",code="OK"} 1.0
"""

from __future__ import annotations

from typing import Callable, Generic, Iterable, Mapping, Protocol, Sequence, TypeVar

import grpc
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from services.common.batch_loop import BatchReport
from services.common.errors import DeadlineExceededError, LimitExceededError, QueueFullError
from services.common.status import status_for
from services.common.metrics import BATCH_SIZE_BUCKETS, LATENCY_BUCKETS
from services.router.admission import OverQuotaError
from services.router.fusion import CategoryVerdict, Degradation

UNKNOWN = "unknown"
NO_DECISION = "none"

#: First match wins; checked against the upper-cased reason text of a degradation.
_REASON_KINDS = (("NOT LOADED", "model_unloaded"), ("UNAUTHENTICATED", "unauthenticated"), ("DEADLINE", "deadline"), ("UNAVAILABLE", "unavailable"), ("FAILED TO CONNECT", "unavailable"),
                 ("RESOURCE_EXHAUSTED", "overloaded"), ("QUEUE FULL", "overloaded"), ("OVERLOAD", "overloaded"),
                 ("MALFORMED", "malformed"), ("INVALID_ARGUMENT", "rejected"))


def reason_kind(reason: str) -> str:
    """A bounded label for a degradation's reason text: model_unloaded, unauthenticated, deadline,
    unavailable, overloaded (including stages skipped under overload), malformed, rejected or error."""
    upper = reason.upper()
    return next((kind for needle, kind in _REASON_KINDS if needle in upper), "error")


def shed_reason(error: BaseException) -> str | None:
    """Why an item was refused for load or time (quota, queue_full, deadline, overload), or None."""
    if isinstance(error, OverQuotaError):
        return "quota"
    if isinstance(error, QueueFullError):
        return "queue_full"
    if isinstance(error, (DeadlineExceededError, TimeoutError)):
        return "deadline"
    if status_for(error) == grpc.StatusCode.RESOURCE_EXHAUSTED and not isinstance(error, LimitExceededError):
        return "overload"
    return None


M = TypeVar("M", bound=MetricWrapperBase)


class _Children(Generic[M]):
    """`metric.labels(*values)`, memoised: prometheus_client takes a lock and rebuilds and checks the
    label tuple on every call, several times per answered item. The label values are bounded (see the
    module docstring) and the router never removes a child, so the memo stays small and current."""

    def __init__(self, metric: M) -> None:
        self._metric = metric
        self._children: dict[tuple[str, ...], M] = {}

    def __call__(self, *values: str) -> M:
        child = self._children.get(values)
        if child is None:
            child = self._children[values] = self._metric.labels(*values)
        return child


class RouterMetrics:
    """Every metric the router exports (`auditmesh_router_*`)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = Counter("auditmesh_router_requests",
                                "Items answered (or calls refused before any item), by tenant, QoS class, decision "
                                "and gRPC status code", ["tenant", "qos_class", "decision", "code"], registry=registry)
        self.duration = Histogram("auditmesh_router_request_duration_seconds",
                                  "Time from admission to answer for one item, errors included",
                                  ["tenant", "qos_class"], buckets=LATENCY_BUCKETS, registry=registry)
        self.stage_duration = Histogram("auditmesh_router_stage_duration_seconds",
                                        "Time per pipeline stage of one item (stages overlap)",
                                        ["qos_class", "stage"], buckets=LATENCY_BUCKETS, registry=registry)
        self.degraded = Counter("auditmesh_router_degraded", "Failed stages answered per policy",
                                ["stage", "reason", "handling"], registry=registry)
        self.shed = Counter("auditmesh_router_shed", "Items refused for load or time", ["qos_class", "reason"],
                            registry=registry)
        self.subcategories = Counter("auditmesh_router_subcategory_decisions",
                                     "Categories whose action a kind of content decided (e.g. self_harm/intent: "
                                     "someone in crisis), by subcategory and action", ["subcategory", "action"],
                                     registry=registry)
        self.in_flight = Gauge("auditmesh_router_in_flight_items", "Items being moderated now", ["qos_class"],
                               registry=registry)
        self.batch_size = Histogram("auditmesh_router_batch_size", "Items per batch sent to an upstream", ["upstream"],
                                    buckets=BATCH_SIZE_BUCKETS, registry=registry)
        self.batch_queue_wait = Histogram("auditmesh_router_batch_queue_wait_seconds",
                                          "Time the oldest item of a batch waited in the router's queue", ["upstream"],
                                          buckets=LATENCY_BUCKETS, registry=registry)
        self.upstream_model = Info("auditmesh_router_upstream_model", "A model behind an upstream and its version",
                                   ["upstream", "model"], registry=registry)
        # The shared quota (services/router/shared_quota.py): leases asked of its backend, near-limit
        # leases, and backend failures by what the tenant got (allow / deny).
        self.quota_leases = Counter("auditmesh_router_quota_leases", "Leases of quota tokens asked of the shared "
                                    "backend, by result (granted, partial, refused)", ["result"], registry=registry)
        self.quota_near_limit = Counter("auditmesh_router_quota_near_limit", "Leases that left a tenant's window "
                                        "counter at or above shared_quota.near_limit_ratio of its limit",
                                        ["tenant", "qos_class"], registry=registry)
        self.quota_backend_errors = Counter("auditmesh_router_quota_backend_errors", "Admissions decided while the "
                                            "shared quota backend failed, by the tenant's on_backend_error",
                                            ["on_backend_error"], registry=registry)
        # The per-item paths' children (record_item, record_refused, in_flight_for).
        self._requests, self._duration = _Children(self.requests), _Children(self.duration)
        self._stage_duration, self._in_flight = _Children(self.stage_duration), _Children(self.in_flight)

    def record_lease(self, result: str) -> None:
        """One lease asked of the shared quota backend: granted, partial or refused."""
        self.quota_leases.labels(result).inc()

    def record_near_limit(self, tenant: str, qos_class: str) -> None:
        """A lease left the tenant's window counter near its limit."""
        self.quota_near_limit.labels(tenant, qos_class).inc()

    def record_quota_backend_error(self, mode: str) -> None:
        """An admission decided (allow / deny) while the shared quota backend failed."""
        self.quota_backend_errors.labels(mode).inc()

    def in_flight_for(self, qos_class: str) -> Gauge:
        """The in-flight gauge of one class (`inc` when an item starts, `dec` when it ends)."""
        return self._in_flight(qos_class)

    def record_batch(self, upstream: str, report: BatchReport) -> None:
        """One batch the router sent to an upstream (its size and how long its oldest item queued)."""
        self.batch_size.labels(upstream).observe(report.size)
        self.batch_queue_wait.labels(upstream).observe(report.queue_wait_s)

    def record_item(self, tenant: str, qos_class: str, code: str, decision: str, timings_ms: Mapping[str, float],
                    total_s: float) -> None:
        """One item answered (decision) or failed (code != OK, decision "none")."""
        self._requests(tenant, qos_class, decision, code).inc()
        self._duration(tenant, qos_class).observe(total_s)
        stage_duration = self._stage_duration
        for stage, ms in timings_ms.items():
            stage_duration(qos_class, stage).observe(ms / 1000.0)

    def record_degradations(self, degradations: Sequence[Degradation]) -> None:
        """The failed (or skipped) stages of one answered item."""
        for degradation in degradations:
            self.degraded.labels(degradation.stage, reason_kind(degradation.reason), degradation.handling).inc()

    def record_subcategories(self, categories: Sequence[CategoryVerdict]) -> None:
        """The kinds of content that decided categories of one answered item (docs/taxonomy.md)."""
        for category in categories:
            if category.subcategory:
                self.subcategories.labels(category.subcategory, category.action).inc()

    def record_refused(self, tenant: str, qos_class: str, code: grpc.StatusCode, error: BaseException,
                       total_s: float | None = None) -> None:
        """A call or item refused with `error`: counted in requests (and in shed when load or time was
        why); `total_s`, for an item that was admitted, goes to the end-to-end histogram."""
        self._requests(tenant, qos_class, NO_DECISION, code.name).inc()
        if total_s is not None:
            self._duration(tenant, qos_class).observe(total_s)
        reason = shed_reason(error)
        if reason is not None:
            self.shed.labels(qos_class, reason).inc()

    def describe_upstream(self, upstream: str, models: Sequence[tuple[str, str]]) -> None:
        """Publish the (name, version) of the models an upstream serves."""
        for name, version in models:
            self.upstream_model.labels(upstream, name).info({"version": version})


class SchedulerView(Protocol):
    """What `SchedulerCollector` reads from an upstream's scheduler."""

    @property
    def shed_count(self) -> int: ...

    @property
    def queue_depth(self) -> int: ...


class SchedulerCollector(Collector):
    """Each upstream scheduler's queue depth and shed count, read at scrape time (nothing is recorded
    inside the scheduler)."""

    def __init__(self, schedulers: Mapping[str, SchedulerView]) -> None:
        self._schedulers = dict(schedulers)

    def collect(self) -> Iterable[Metric]:
        depth = GaugeMetricFamily("auditmesh_router_queue_depth", "Items queued for an upstream, not yet in a batch",
                                  labels=["upstream"])
        shed = CounterMetricFamily("auditmesh_router_scheduler_shed", "Items an upstream's scheduler shed because "
                                   "they could not meet their deadline", labels=["upstream"])
        for name, scheduler in sorted(self._schedulers.items()):
            depth.add_metric([name], scheduler.queue_depth)
            shed.add_metric([name], scheduler.shed_count)
        return [depth, shed]


class PolicyVersionsCollector(Collector):
    """`auditmesh_router_policy_info{policy, version}`: the globally active version of each policy, read
    at scrape time from the live snapshot, so it follows every swap (activation, rollback, file reload,
    canary promotion) and a policy no longer served drops out.

    Example::

        registry.register(PolicyVersionsCollector(lambda: runtime.snapshot.policy_versions()))
        # auditmesh_router_policy_info{policy="default",version="2026-12-01.1"} 1.0
    """

    def __init__(self, versions: Callable[[], Mapping[str, str]]) -> None:
        self._versions = versions

    def collect(self) -> Iterable[Metric]:
        info = InfoMetricFamily("auditmesh_router_policy", "The active version of each policy", labels=["policy"])
        for name, version in sorted(self._versions().items()):
            info.add_metric([name], {"version": version})
        return [info]


class VerdictCacheView(Protocol):
    """What `VerdictCacheCollector` reads from the verdict cache (services.router.verdict_cache)."""

    def stats(self) -> Mapping[str, CacheStatsView]: ...


class CacheStatsView(Protocol):
    hits: int
    misses: int
    evictions: dict[str, int]
    bytes: int
    entries: int


class VerdictCacheCollector(Collector):
    """The verdict cache's counters per tenant, read at scrape time: `auditmesh_router_verdict_cache_hits_total`,
    `..._misses_total`, `..._evictions_total{reason=size|ttl}`, `..._bytes` and `..._entries`.

    Example::

        registry.register(VerdictCacheCollector(cache))
        # auditmesh_router_verdict_cache_hits_total{tenant="acme"} 12.0
    """

    def __init__(self, cache: VerdictCacheView) -> None:
        self._cache = cache

    def collect(self) -> Iterable[Metric]:
        prefix = "auditmesh_router_verdict_cache"
        hits = CounterMetricFamily(f"{prefix}_hits", "Items answered from the verdict cache", labels=["tenant"])
        misses = CounterMetricFamily(f"{prefix}_misses", "Cacheable items not found in the verdict cache",
                                     labels=["tenant"])
        evictions = CounterMetricFamily(f"{prefix}_evictions", "Entries evicted: size (the tenant's byte budget) "
                                        "or ttl (expired)", labels=["tenant", "reason"])
        size = GaugeMetricFamily(f"{prefix}_bytes", "Estimated bytes held by the tenant's cache partition",
                                 labels=["tenant"])
        entries = GaugeMetricFamily(f"{prefix}_entries", "Entries in the tenant's cache partition", labels=["tenant"])
        for tenant, stats in sorted(self._cache.stats().items()):
            hits.add_metric([tenant], stats.hits)
            misses.add_metric([tenant], stats.misses)
            for reason, count in sorted(stats.evictions.items()):
                evictions.add_metric([tenant, reason], count)
            size.add_metric([tenant], stats.bytes)
            entries.add_metric([tenant], stats.entries)
        return [hits, misses, evictions, size, entries]
