"""Prometheus metrics: one registry per service, served on `server.metrics_listen` at `/metrics`.

Each service builds its registry with `new_registry(service, version)` (process and GC collectors plus
`auditmesh_build_info`), defines its metrics on it (`services.common.serving.model_metrics` for the modality services,
`services.router.metrics` for the router) and `GrpcService` starts a `MetricsServer` for it when
`metrics_listen` is set ("" = off). Names follow Prometheus conventions: `_total` counters, units in
the name (`_seconds`), base units. Recording happens in the servers, never in pure modules.

Example::

    registry = new_registry("text", "0.1.0")
    metrics = ModelMetrics(registry)
    server = MetricsServer("127.0.0.1:9101", registry)
    port = server.start()          # curl http://127.0.0.1:9101/metrics
    await server.stop()
"""

from __future__ import annotations

import asyncio
import logging
import threading
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Info, start_http_server
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

log = logging.getLogger(__name__)

#: Seconds, 0.5 ms .. 10 s: the spread from one text row to a slow OCR batch.
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
BATCH_SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128)


def new_registry(service: str, version: str) -> CollectorRegistry:
    """A registry with the process, platform and GC collectors and `auditmesh_build_info`."""
    registry = CollectorRegistry()
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    Info("auditmesh_build", "The auditmesh service and its version", registry=registry).info(
        {"service": service, "version": version})
    return registry


def split_listen(listen: str) -> tuple[str, int]:
    """('127.0.0.1', 9100) from '127.0.0.1:9100'; ValueError for anything else."""
    host, sep, port = listen.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"metrics_listen must be host:port, got {listen!r}")
    return host.strip("[]"), int(port)


class MetricsServer:
    """The `/metrics` HTTP endpoint (prometheus_client's threaded WSGI server) for one registry."""

    def __init__(self, listen: str, registry: CollectorRegistry) -> None:
        self.host, self._port = split_listen(listen)
        self.registry = registry
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The bound port (after `start`; useful with port 0)."""
        return self._server.server_port if self._server is not None else self._port

    def start(self) -> int:
        """Bind and serve in a daemon thread; returns the bound port. OSError if the port is taken."""
        self._server, self._thread = start_http_server(self._port, self.host, self.registry)
        log.info("metrics on http://%s:%d/metrics", self.host, self.port)
        return self.port

    async def stop(self) -> None:
        """Stop serving (waits for the server thread, off the event loop). Safe to call twice."""
        server, thread, self._server, self._thread = self._server, self._thread, None, None
        if server is None:
            return
        await asyncio.to_thread(server.shutdown)
        server.server_close()
        if thread is not None:
            await asyncio.to_thread(thread.join)
