"""gRPC server lifecycle shared by every service: listen, health, reflection, graceful shutdown.

Shutdown order (on SIGTERM or SIGINT): health turns NOT_SERVING first (so load balancers stop sending),
the server stops accepting new calls and gives in-flight calls `grace_period_s` to finish, then the
`on_close` callbacks run (e.g. batchers drain what they accepted), then the `/metrics` endpoint
stops, then the process exits.

Telemetry hooks: when tracing is on (`services.common.tracing.telemetry`) the OpenTelemetry aio server
interceptor goes first in the interceptor chain; when `server.metrics_listen` is set and a registry is
given, a `/metrics` endpoint serves it from `start` to `stop`.

Undecodable request messages are answered INVALID_ARGUMENT (`services.common.request_decoding`).
Transport: with `server.tls` set the port is TLS (mTLS when `client_ca_file` is set), and the
certificate files are re-read when they change (`services.common.tls`); without it, plaintext.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from typing import Awaitable, Callable, Collection, Sequence

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from prometheus_client import CollectorRegistry

from services.common.metrics import MetricsServer
from services.common.request_decoding import DecodeGuard
from services.common.service_config import ServerConfig
from services.common.tls import server_credentials
from services.common.tracing.telemetry import server_interceptors

log = logging.getLogger(__name__)
#: The grpc.health name a liveness probe asks: SERVING from start to stop, whatever `hold` says (a replica whose
#: data is stale is taken out of traffic, not restarted: a restart could not load data its store cannot give).
LIVENESS_SERVICE = "auditmesh.liveness"


def grpc_options(max_message_bytes: int) -> list[tuple[str, int]]:
    """Channel/server options that raise message-size limits (images) symmetrically."""
    return [("grpc.max_receive_message_length", max_message_bytes),
            ("grpc.max_send_message_length", max_message_bytes)]


#: Clients may send keepalive pings every 10 s or more, also between calls (the client library pings
#: every 30 s); a client pinging faster is told GOAWAY (too_many_pings) by gRPC.
KEEPALIVE_OPTIONS = [("grpc.keepalive_permit_without_calls", 1), ("grpc.http2.min_ping_interval_without_data_ms", 10_000)]


def server_options(config: ServerConfig) -> list[tuple[str, int]]:
    """A server's gRPC options: message sizes, client keepalive allowed, the backlog limits when
    `max_pending_calls` is set, the connection age when `max_connection_age_s` is."""
    options = [*grpc_options(config.max_message_bytes), *KEEPALIVE_OPTIONS]
    if config.max_connection_age_s:
        options += [("grpc.max_connection_age_ms", round(config.max_connection_age_s * 1000)),
                    ("grpc.max_connection_age_grace_ms", round(config.max_connection_age_grace_s * 1000))]
    if config.max_pending_calls:
        options += [("grpc.server.max_pending_requests", config.max_pending_calls // 2),
                    ("grpc.server.max_pending_requests_hard_limit", config.max_pending_calls)]
    return options


def _transport(config: ServerConfig) -> str:
    if config.tls is None:
        return "plaintext"
    return "TLS, client certificates required" if config.tls.mutual else "TLS"


class GrpcService:
    """A running grpc.aio server with health and reflection. `start` → `serve_until_signal` or `stop`.

    Example::

        service = GrpcService("text", config.server, service_names=[...], register=add_servicers)
        port = await service.start()
        await service.serve_until_signal()
    """

    def __init__(self, name: str, config: ServerConfig, *, service_names: Sequence[str],
                 register: Callable[[grpc.aio.Server], None],
                 on_serving_change: Callable[[bool], None] | None = None,
                 on_close: Sequence[Callable[[], Awaitable[None]]] = (),
                 interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
                 metrics_registry: CollectorRegistry | None = None,
                 tolerant_streams: Collection[str] = ()) -> None:
        self.name = name
        self.config = config
        self._service_names = list(service_names)
        self._register = register
        self._on_serving_change = on_serving_change
        self._on_close = list(on_close)
        self._interceptors = list(interceptors)
        # Last: it wraps the servicers' own handlers (an undecodable request is INVALID_ARGUMENT;
        # on `tolerant_streams` the servicer answers it and the stream goes on).
        self._decode_guard = DecodeGuard(tolerant_streams)
        self._health = health.aio.HealthServicer()
        self._server: grpc.aio.Server | None = None
        self._stopped = asyncio.Event()
        #: Draining: `hold` no longer changes health. `_held`: why health is NOT_SERVING while running, or None.
        self._stopping = False
        self._held: str | None = None
        self.port = 0
        #: The registry served on `metrics_listen` (kept even when no endpoint serves it).
        self.registry = metrics_registry
        self.metrics = (MetricsServer(config.metrics_listen, metrics_registry)
                        if config.metrics_listen and metrics_registry is not None else None)

    async def start(self) -> int:
        """Bind, register services, mark SERVING. Returns the bound port (useful with port 0)."""
        interceptors = [*server_interceptors(), *self._interceptors, self._decode_guard]
        server = grpc.aio.server(options=server_options(self.config), interceptors=interceptors,
                                 maximum_concurrent_rpcs=self.config.max_concurrent_rpcs or None)
        self._register(server)
        health_pb2_grpc.add_HealthServicer_to_server(self._health, server)
        reflection.enable_server_reflection([*self._service_names, health.SERVICE_NAME, reflection.SERVICE_NAME], server)
        if self.config.tls is not None:  # certificate files re-read when they change (services/common/tls.py)
            credentials = server_credentials(self.config.tls, source=f"{self.name}: server.tls")
            self.port = server.add_secure_port(self.config.listen, credentials)
        else:
            self.port = server.add_insecure_port(self.config.listen)
        if self.port == 0:
            raise OSError(f"{self.name}: cannot listen on {self.config.listen}")
        if self.metrics is not None:
            self.metrics.start()
        await server.start()
        self._server = server
        await self._set_serving(True)
        host = self.config.listen.rpartition(":")[0]
        log.info("%s serving on %s:%d (%s)", self.name, host, self.port, _transport(self.config))
        return self.port

    async def hold(self, reason: str | None) -> None:
        """Health NOT_SERVING while `reason` (a served model's data is stale: load balancers and kubelet's
        readiness take the replica out) and SERVING again when None; nothing once stopping (draining stays
        NOT_SERVING). LIVENESS_SERVICE is not held: a replica waiting for its data is not restarted."""
        if self._server is None or self._stopped.is_set() or self._stopping:
            return
        if (reason is None) == (self._held is None):  # no change of state (a reason's wording may change)
            self._held = reason
            return
        if reason is not None:
            log.warning("%s not ready: %s", self.name, reason)
        elif self._held is not None:
            log.info("%s ready again", self.name)
        self._held = reason
        status = health_pb2.HealthCheckResponse.NOT_SERVING if reason else health_pb2.HealthCheckResponse.SERVING
        for name in ["", *self._service_names]:
            await self._health.set(name, status)

    async def _set_serving(self, serving: bool) -> None:
        status = health_pb2.HealthCheckResponse.SERVING if serving else health_pb2.HealthCheckResponse.NOT_SERVING
        for name in ["", *self._service_names, LIVENESS_SERVICE]:
            await self._health.set(name, status)
        if self._on_serving_change is not None:
            self._on_serving_change(serving)

    async def stop(self) -> None:
        """Graceful shutdown (see module docstring). Safe to call twice."""
        if self._server is None or self._stopped.is_set():
            await self._stopped.wait()
            return
        log.info("%s draining: NOT_SERVING, up to %.1fs for in-flight calls", self.name, self.config.grace_period_s)
        self._stopping = True
        await self._set_serving(False)
        await self._server.stop(self.config.grace_period_s)
        for close in self._on_close:
            await close()
        if self.metrics is not None:
            await self.metrics.stop()
        log.info("%s stopped", self.name)
        self._stopped.set()

    async def serve_until_signal(self) -> None:
        """Block until SIGTERM/SIGINT, then stop gracefully."""
        loop = asyncio.get_running_loop()
        requested = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, requested.set)
        await requested.wait()
        await self.stop()
