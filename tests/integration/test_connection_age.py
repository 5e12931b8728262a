"""Issue 41: a service's `server.max_connection_age_s` closes each client connection after that age
(GOAWAY), and a client keeps calling without an error: its channel reconnects (through its load
balancer, which is how connections spread over replicas that started later). The server options
are the ones every service is built with (services/common/grpc_server.py)."""

from __future__ import annotations

import asyncio
import time

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from auditmesh.client.settings import DEFAULT_CHANNEL_OPTIONS
from services.common.grpc_server import server_options
from services.common.service_config import ServerConfig


class PeerRecordingHealth(health.aio.HealthServicer):
    """Health checks that remember which client connection (peer address) each came on."""

    def __init__(self) -> None:
        super().__init__()
        self.peers: set[str] = set()

    async def Check(self, request: health_pb2.HealthCheckRequest, context: grpc.aio.ServicerContext) -> health_pb2.HealthCheckResponse:
        self.peers.add(context.peer())
        return await super().Check(request, context)


async def test_connections_are_remade_after_their_age_without_a_failed_call() -> None:
    config = ServerConfig("127.0.0.1:0", max_connection_age_s=0.5, max_connection_age_grace_s=1.0)
    server = grpc.aio.server(options=server_options(config))
    servicer = PeerRecordingHealth()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=list(DEFAULT_CHANNEL_OPTIONS)) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            calls, stop_at = 0, time.monotonic() + 2.5
            while time.monotonic() < stop_at:
                response = await stub.Check(health_pb2.HealthCheckRequest(), timeout=5)  # raises on a failed call
                assert response.status == health_pb2.HealthCheckResponse.SERVING
                calls += 1
                await asyncio.sleep(0.01)
        assert calls > 50
        assert len(servicer.peers) >= 3, servicer.peers  # a new connection (client port) every ~0.5 s
    finally:
        await server.stop(None)
