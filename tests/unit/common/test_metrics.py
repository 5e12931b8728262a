"""Prometheus metrics: a service registry, per-model batch metrics, the /metrics endpoint's lifecycle,
and the metrics_listen setting with its environment override."""

from __future__ import annotations

import socket

import pytest

from services.common.serving.batcher import BatchReport
from services.common.metrics import MetricsServer, new_registry, split_listen
from services.common.serving.model_metrics import ModelMetrics
from services.common.service_config import ServerConfig, server_from_env
from tests.stubs import sample, scrape


def test_model_metrics_record_each_batch_and_read_queue_depth_at_scrape_time() -> None:
    registry = new_registry("text", "0.1.0")
    metrics = ModelMetrics(registry)
    depth = [3]
    metrics.describe("m", "2", "onnxruntime_onnx", lambda: depth[0])
    metrics.record_batch("m", BatchReport(size=3, queue_wait_s=0.004, run_s=0.02, item_waits_s=(0.004, 0.002, 0.001)))
    metrics.record_batch("m", BatchReport(size=1, queue_wait_s=0.0, run_s=0.01, error=RuntimeError("boom")))
    value = registry.get_sample_value
    assert value("auditmesh_model_batch_size_count", {"model": "m"}) == 2
    assert value("auditmesh_model_batch_size_sum", {"model": "m"}) == 4
    assert value("auditmesh_model_inference_duration_seconds_sum", {"model": "m"}) == pytest.approx(0.03)
    assert value("auditmesh_model_queue_wait_seconds_count", {"model": "m"}) == 4  # every row, not every batch
    assert value("auditmesh_model_batch_errors_total", {"model": "m"}) == 1
    assert value("auditmesh_model_queue_depth", {"model": "m"}) == 3
    depth[0] = 0
    assert value("auditmesh_model_queue_depth", {"model": "m"}) == 0
    assert value("auditmesh_model_info", {"model": "m", "version": "2", "platform": "onnxruntime_onnx"}) == 1
    assert value("auditmesh_build_info", {"service": "text", "version": "0.1.0"}) == 1


async def test_metrics_server_serves_the_registry_until_stopped() -> None:
    registry = new_registry("router", "0.1.0")
    ModelMetrics(registry).requests.labels("m", "OK").inc(2)
    server = MetricsServer("127.0.0.1:0", registry)
    port = server.start()
    assert port > 0 and server.port == port
    samples = scrape(port)
    assert sample(samples, "auditmesh_model_requests_total", model="m", code="OK") == 2
    assert sample(samples, "auditmesh_build_info", service="router", version="0.1.0") == 1
    assert any(name == "process_cpu_seconds_total" for name, _ in samples)
    await server.stop()
    with pytest.raises(OSError):
        scrape(port)
    await server.stop()  # twice is harmless


def test_metrics_server_reports_a_taken_port() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(OSError):
            MetricsServer(f"127.0.0.1:{taken.getsockname()[1]}", new_registry("text", "0")).start()


@pytest.mark.parametrize("listen", ["9100", "localhost:", ":9100", "host:port"])
def test_metrics_listen_must_be_host_port(listen: str) -> None:
    with pytest.raises(ValueError, match="metrics_listen must be host:port"):
        ServerConfig(metrics_listen=listen)
    with pytest.raises(ValueError, match="metrics_listen must be host:port"):
        split_listen(listen)


def test_metrics_listen_env_override() -> None:
    server = ServerConfig("127.0.0.1:8101", metrics_listen="127.0.0.1:9101")
    assert server_from_env(server, {}).metrics_listen == "127.0.0.1:9101"
    assert server_from_env(server, {"AUDITMESH_METRICS_LISTEN": "0.0.0.0:9200"}).metrics_listen == "0.0.0.0:9200"
    assert server_from_env(server, {"AUDITMESH_METRICS_LISTEN": "off"}).metrics_listen == ""
    assert split_listen("[::1]:9100") == ("::1", 9100)
