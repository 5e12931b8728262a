"""What a modality service records per served model, on the service's Prometheus registry.

Example::

    metrics = ModelMetrics(new_registry("text", "0.1.0"))
    metrics.record_batch("text_moderation", report)   # a BatchReport from the batcher's on_batch hook
"""

from __future__ import annotations

from typing import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info

from services.common.metrics import BATCH_SIZE_BUCKETS, LATENCY_BUCKETS
from services.common.batch_loop import BatchReport


class ModelMetrics:
    """What a modality service records per served model (label `model`)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = Counter("auditmesh_model_requests", "ModelInfer calls by model and gRPC status code",
                                ["model", "code"], registry=registry)
        self.batch_size = Histogram("auditmesh_model_batch_size", "Rows per batch run by the model",
                                    ["model"], buckets=BATCH_SIZE_BUCKETS, registry=registry)
        self.inference = Histogram("auditmesh_model_inference_duration_seconds", "Time to run one batch",
                                   ["model"], buckets=LATENCY_BUCKETS, registry=registry)
        self.queue_wait = Histogram("auditmesh_model_queue_wait_seconds",
                                    "Time each row waited in the batcher's queue before its batch ran",
                                    ["model"], buckets=LATENCY_BUCKETS, registry=registry)
        self.batch_errors = Counter("auditmesh_model_batch_errors", "Batches whose run raised", ["model"],
                                    registry=registry)
        self.shed = Counter("auditmesh_model_shed", "Rows refused before running, by reason", ["model", "reason"],
                            registry=registry)
        self.queue_depth = Gauge("auditmesh_model_queue_depth", "Rows queued and not yet in a batch", ["model"],
                                 registry=registry)
        self.info = Info("auditmesh_model", "A served model and its version", ["model"], registry=registry)
        self.budget_held = Gauge("auditmesh_model_budget_held_bytes", "What the loaded models that count against the "
                                 "memory budget (tenant classifiers) hold", registry=registry)
        self.budget_evictions = Gauge("auditmesh_model_budget_evictions", "Models unloaded for the memory budget "
                                      "since the start (loaded again on their next request)", registry=registry)

    def watch_budget(self, held_bytes: Callable[[], int], evictions: Callable[[], int]) -> None:
        """Publish the memory budget's use and evictions (read at scrape time)."""
        self.budget_held.set_function(lambda: float(held_bytes()))
        self.budget_evictions.set_function(lambda: float(evictions()))

    def describe(self, model: str, version: str, platform: str, queue_depth: Callable[[], int]) -> None:
        """Publish the model's version and watch its queue depth (read at scrape time)."""
        self.info.labels(model).info({"version": version, "platform": platform})
        self.queue_depth.labels(model).set_function(lambda: float(queue_depth()))

    def record_batch(self, model: str, report: BatchReport) -> None:
        """Record one batch the batcher ran (its `on_batch` report)."""
        self.batch_size.labels(model).observe(report.size)
        self.inference.labels(model).observe(report.run_s)
        waits = self.queue_wait.labels(model)
        for wait in report.item_waits_s or (report.queue_wait_s,):
            waits.observe(wait)
        if report.error is not None:
            self.batch_errors.labels(model).inc()
