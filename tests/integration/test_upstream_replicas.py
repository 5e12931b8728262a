"""Issue 41: the router's channel to a modality upstream spreads calls over every address the upstream
resolves to (a Kubernetes headless Service's pods), with the options ModalityDispatcher uses
(services/router/dispatch.py: `round_robin`), and keeps answering when one replica goes away."""

from __future__ import annotations

import numpy as np
import grpc
import tritonclient.grpc.aio as triton_aio
from tritonclient.grpc import service_pb2, service_pb2_grpc

from services.common.grpc_server import grpc_options
from services.router.dispatch import LOAD_BALANCING_OPTIONS, RECONNECT_OPTIONS
from services.router.upstream_client import UpstreamClient


class CountingKServe(service_pb2_grpc.GRPCInferenceServiceServicer):
    """A KServe server that answers every ModelInfer with an empty response, counting them."""

    def __init__(self) -> None:
        self.calls = 0

    async def ModelInfer(self, request: service_pb2.ModelInferRequest, context: grpc.aio.ServicerContext) -> service_pb2.ModelInferResponse:
        self.calls += 1
        return service_pb2.ModelInferResponse(model_name=request.model_name, id=request.id)


async def start(servicer: CountingKServe) -> tuple[grpc.aio.Server, int]:
    server = grpc.aio.server()
    service_pb2_grpc.add_GRPCInferenceServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, port


async def test_calls_spread_over_every_replica_and_survive_one_leaving() -> None:
    replicas = [CountingKServe(), CountingKServe()]
    servers = [await start(r) for r in replicas]
    url = "ipv4:" + ",".join(f"127.0.0.1:{port}" for _, port in servers)  # as DNS would list a headless Service's pods
    client = UpstreamClient(url, channel_args=[*grpc_options(8 << 20), *RECONNECT_OPTIONS, *LOAD_BALANCING_OPTIONS])
    text = triton_aio.InferInput("TEXT", [1], "BYTES")
    text.set_data_from_numpy(np.array([b"hello"], dtype=np.object_))
    try:
        for _ in range(40):
            await client.infer("text_moderation", [text], client_timeout=5)
        assert all(r.calls >= 15 for r in replicas), [r.calls for r in replicas]  # round robin, not pick_first
        await servers[1][0].stop(None)
        before = replicas[0].calls
        for _ in range(20):
            await client.infer("text_moderation", [text], client_timeout=5)
        assert replicas[0].calls - before == 20
    finally:
        await client.close()
        await servers[0][0].stop(None)
