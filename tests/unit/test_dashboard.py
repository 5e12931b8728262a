"""dashboards/auditmesh.json is valid Grafana JSON and every auditmesh_* series it queries is one the
code exports (so renaming a metric without updating the dashboard fails here)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from prometheus_client import generate_latest

from services.common.serving.batcher import BatchReport
from services.common.metrics import new_registry
from services.common.serving.model_metrics import ModelMetrics
from services.router.metrics import PolicyVersionsCollector, RouterMetrics, SchedulerCollector

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = json.loads((ROOT / "dashboards" / "auditmesh.json").read_text())


class IdleScheduler:
    queue_depth = 0
    shed_count = 0


def exported_series() -> set[str]:
    """Every sample name the router and a modality service expose, with one observation each."""
    router, model = new_registry("router", "0"), new_registry("text", "0")
    metrics = RouterMetrics(router)
    router.register(SchedulerCollector({"text": IdleScheduler()}))
    metrics.record_item("t", "standard", "OK", "allow", {"text": 1.0}, 0.01)
    metrics.shed.labels("standard", "deadline").inc()
    metrics.degraded.labels("ocr", "unavailable", "fail_open").inc()
    metrics.in_flight.labels("standard").set(0)
    router.register(PolicyVersionsCollector(lambda: {"default": "1"}))
    metrics.describe_upstream("text", [("text_moderation", "1")])
    models = ModelMetrics(model)
    models.describe("m", "1", "onnx", lambda: 0)
    models.record_batch("m", BatchReport(1, 0.0, 0.01))
    models.requests.labels("m", "OK").inc()
    models.shed.labels("m", "queue_full").inc()
    text = (generate_latest(router) + generate_latest(model)).decode()
    return set(re.findall(r"^(auditmesh_[a-z_]+)", text, re.M))


def test_dashboard_shape() -> None:
    assert DASHBOARD["uid"] == "auditmesh" and DASHBOARD["panels"]
    titles = " ".join(panel["title"] for panel in DASHBOARD["panels"]).lower()
    for topic in ("p99 latency per tenant", "batch sizes", "shed rate", "queue depth"):
        assert topic in titles
    assert {v["name"] for v in DASHBOARD["templating"]["list"]} == {"datasource", "tenant", "qos_class"}


def test_every_queried_series_is_exported() -> None:
    queried = {name for panel in DASHBOARD["panels"] for target in panel["targets"]
               for name in re.findall(r"auditmesh_[a-z_]+", target["expr"])}
    assert queried and queried <= exported_series(), queried - exported_series()
