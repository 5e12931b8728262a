"""A served model whose data goes stale takes its replica out of rotation: the KServe servicer's ModelReady
and ServerReady say not ready, and `hold_while_problem` keeps grpc.health NOT_SERVING until it is fresh
again (while `auditmesh.liveness` stays SERVING: a liveness probe does not restart it); a draining service
stays NOT_SERVING whatever the model says."""

from __future__ import annotations

import asyncio
from typing import Mapping, Sequence

import grpc
import numpy as np
from grpc_health.v1 import health_pb2, health_pb2_grpc
from tritonclient.grpc import service_pb2 as kserve_pb2

from services.common.contracts.tensors import TensorSpec
from services.common.grpc_server import LIVENESS_SERVICE, GrpcService
from services.common.serving.modality_config import ModalityServiceConfig
from services.common.serving.modality_main import build_service, hold_while_problem
from services.common.serving.model_api import ModelFile
from services.common.service_config import ServerConfig

SERVING, NOT_SERVING = health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING


class StaleableModel:
    name = "staleable"
    version = "1"
    platform = "test"
    max_batch_size = 4
    inputs: Sequence[TensorSpec] = (TensorSpec("IN", "FP32", (-1, 1)),)
    outputs: Sequence[TensorSpec] = (TensorSpec("OUT", "FP32", (-1, 1)),)

    def __init__(self) -> None:
        self.problem: str | None = None

    def infer(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {"OUT": np.asarray(inputs["IN"], dtype=np.float32)}

    def warmup(self) -> None:
        pass

    def model_files(self) -> Sequence[ModelFile]:
        return []

    def close(self) -> None:
        pass

    def serving_problem(self) -> str | None:
        return self.problem


async def health(channel: grpc.aio.Channel, service: str = "") -> int:
    response = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=service))
    return int(response.status)


async def test_a_stale_model_is_not_ready_until_fresh_and_draining_stays_not_serving() -> None:
    model = StaleableModel()
    config = ModalityServiceConfig(service="text", server=ServerConfig("127.0.0.1:0", grace_period_s=0.1))
    service, servicer = build_service(config, [model])
    port = await service.start()
    watcher = asyncio.create_task(hold_while_problem(service, servicer, interval_s=0.02))
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            ready = channel.unary_unary("/inference.GRPCInferenceService/ModelReady",
                                        request_serializer=kserve_pb2.ModelReadyRequest.SerializeToString,
                                        response_deserializer=kserve_pb2.ModelReadyResponse.FromString)
            assert await health(channel) == SERVING
            assert (await ready(kserve_pb2.ModelReadyRequest(name="staleable"))).ready
            model.problem = "banks not confirmed current for 61 s"
            assert not (await ready(kserve_pb2.ModelReadyRequest(name="staleable"))).ready
            assert servicer.serving_problem() == "staleable: banks not confirmed current for 61 s"
            for _ in range(100):
                if await health(channel) == NOT_SERVING:
                    break
                await asyncio.sleep(0.02)
            assert await health(channel) == NOT_SERVING
            assert await health(channel, LIVENESS_SERVICE) == SERVING  # out of traffic, not restarted
            model.problem = None
            for _ in range(100):
                if await health(channel) == SERVING:
                    break
                await asyncio.sleep(0.02)
            assert await health(channel) == SERVING and (await ready(kserve_pb2.ModelReadyRequest(name="staleable"))).ready
    finally:
        watcher.cancel()
        await service.stop()
    await service.hold(None)  # after stop: no effect, and no error
    assert isinstance(service, GrpcService)
