"""Issue 12 item 4: the modality services' KServe ports were unauthenticated. An anonymous
RepositoryModelUnload unloaded the vision model. Now every KServe call needs the mesh's shared secret,
model load/unload a separate admin secret, health stays open, wrong secrets are throttled, the router
sends the secret, and a service without a secret refuses to start."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import AsyncIterator

import grpc
import numpy as np
import pytest
import tritonclient.grpc.aio as triton_aio
from google.rpc import error_details_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_status import rpc_status
from tritonclient.grpc import InferInput, service_pb2, service_pb2_grpc
from tritonclient.utils import InferenceServerException

from services.common.auth_throttle import ThrottleConfig
from services.common.grpc_server import GrpcService
from services.common.internal_auth import (ADMIN_SECRET_HEADER, SECRET_HEADER, InternalCredentials, SharedSecret)
from services.common.service_config import ServerConfig
from services.common.serving.kserve_servicer import KServeServicer
from services.common.serving.modality_config import ModalityServiceConfig
from services.common.serving.modality_main import build_service
from services.launcher import ROOT
from services.router.upstream_client import UpstreamClient, UpstreamSecurity
from tests.stubs import GatedModel

SECRET, ADMIN_SECRET = "service-secret-0123456789", "admin-secret-0123456789"
UNLOAD = service_pb2.RepositoryModelUnloadRequest(model_name="gated")


class Service:
    def __init__(self, service: GrpcService, servicer: KServeServicer, port: int) -> None:
        self.service, self.servicer, self.port = service, servicer, port
        self.address = f"127.0.0.1:{port}"
        self.registry = service.registry


async def start(admin: bool = True, peer_failures: int = 20) -> Service:
    config = ModalityServiceConfig("text", ServerConfig("127.0.0.1:0", grace_period_s=0.5),
                                   auth_throttle=ThrottleConfig(peer_failures=peer_failures))
    credentials = InternalCredentials(SharedSecret(SECRET), SharedSecret(ADMIN_SECRET) if admin else None)
    service, servicer = build_service(config, [GatedModel()], factory=lambda _: [GatedModel()], credentials=credentials)
    return Service(service, servicer, await service.start())


@pytest.fixture
async def kserve() -> AsyncIterator[Service]:
    running = await start()
    yield running
    await running.service.stop()


async def code_of(call: object) -> grpc.StatusCode:
    try:
        await call  # type: ignore[misc]
    except grpc.aio.AioRpcError as error:
        return error.code()
    raise AssertionError("the call succeeded")


def text_infer() -> service_pb2.ModelInferRequest:
    request = service_pb2.ModelInferRequest(model_name="gated")
    tensor = request.inputs.add(name="TEXT", datatype="BYTES", shape=[1, 1])
    tensor.contents.bytes_contents.append(b"hello")
    return request


async def test_anonymous_calls_are_refused_and_the_model_stays_loaded(kserve: Service) -> None:
    async with grpc.aio.insecure_channel(kserve.address) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        assert await code_of(stub.RepositoryModelUnload(UNLOAD)) == grpc.StatusCode.UNAUTHENTICATED
        assert await code_of(stub.ModelInfer(text_infer())) == grpc.StatusCode.UNAUTHENTICATED
        assert await code_of(stub.ModelMetadata(service_pb2.ModelMetadataRequest(name="gated"))) == grpc.StatusCode.UNAUTHENTICATED
        wrong = [(SECRET_HEADER, "not-the-secret-at-all")]
        assert await code_of(stub.ModelInfer(text_infer(), metadata=wrong)) == grpc.StatusCode.UNAUTHENTICATED
        # Health stays open for probes.
        health = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest())
        assert health.status == health_pb2.HealthCheckResponse.SERVING
        ready = await stub.ModelReady(service_pb2.ModelReadyRequest(name="gated"), metadata=[(SECRET_HEADER, SECRET)])
        assert ready.ready  # the anonymous unload did nothing
        answer = await stub.ModelInfer(text_infer(), metadata=[(SECRET_HEADER, SECRET)])
        assert answer.model_name == "gated"


async def test_repository_control_needs_the_admin_secret(kserve: Service) -> None:
    async with grpc.aio.insecure_channel(kserve.address) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        service_only = [(SECRET_HEADER, SECRET)]
        assert await code_of(stub.RepositoryModelUnload(UNLOAD, metadata=service_only)) == grpc.StatusCode.UNAUTHENTICATED
        assert await code_of(stub.RepositoryModelLoad(service_pb2.RepositoryModelLoadRequest(model_name="gated"),
                                                      metadata=service_only)) == grpc.StatusCode.UNAUTHENTICATED
        await stub.RepositoryModelUnload(UNLOAD, metadata=[(ADMIN_SECRET_HEADER, ADMIN_SECRET)])
        ready = await stub.ModelReady(service_pb2.ModelReadyRequest(name="gated"), metadata=service_only)
        assert not ready.ready


async def test_without_an_admin_secret_repository_control_is_refused_to_everyone() -> None:
    running = await start(admin=False)
    try:
        async with grpc.aio.insecure_channel(running.address) as channel:
            stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
            metadata = [(SECRET_HEADER, SECRET), (ADMIN_SECRET_HEADER, ADMIN_SECRET)]
            assert await code_of(stub.RepositoryModelUnload(UNLOAD, metadata=metadata)) == grpc.StatusCode.PERMISSION_DENIED
    finally:
        await running.service.stop()


async def test_wrong_secrets_are_throttled_with_retry_info_and_counted() -> None:
    running = await start(peer_failures=5)
    try:
        async with grpc.aio.insecure_channel(running.address) as channel:
            stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
            codes = [await code_of(stub.ModelInfer(text_infer(), metadata=[(SECRET_HEADER, f"guess-number-{i:08d}")]))
                     for i in range(8)]
            assert codes[:4] == [grpc.StatusCode.UNAUTHENTICATED] * 4
            assert codes[4:] == [grpc.StatusCode.RESOURCE_EXHAUSTED] * 4
            try:
                await stub.ModelInfer(text_infer())
            except grpc.aio.AioRpcError as error:
                status = rpc_status.from_call(error)
                assert status is not None
                info = error_details_pb2.RetryInfo()
                assert status.details[0].Unpack(info) and info.retry_delay.seconds > 0
        assert running.registry is not None
        value = running.registry.get_sample_value
        assert value("auditmesh_auth_failures_total", {"surface": "kserve"}) == 5
        assert value("auditmesh_auth_throttled_total", {"surface": "kserve"}) == 5  # 4 guesses + 1 anonymous call
    finally:
        await running.service.stop()


async def test_the_router_upstream_client_sends_the_secret(kserve: Service) -> None:
    anonymous = UpstreamClient(kserve.address, channel_args=[])
    authed = UpstreamClient(kserve.address, channel_args=[], security=UpstreamSecurity(secret=SECRET))
    try:
        with pytest.raises(InferenceServerException, match="UNAUTHENTICATED"):
            await anonymous.get_model_config("gated")
        config = await authed.get_model_config("gated")
        assert config.config.name == "gated"
        tensor = InferInput("TEXT", [1, 1], "BYTES")
        tensor.set_data_from_numpy(np.array([[b"hi"]], dtype=np.object_))
        result = await authed.infer("gated", [tensor])
        assert result.as_numpy("LENGTH").shape == (1, 1)
    finally:
        await anonymous.close()
        await authed.close()
    assert "secret=<set>" in repr(authed.security) and SECRET not in repr(authed.security)


def test_a_modality_service_without_a_secret_refuses_to_start(tmp_path: object) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AUDITMESH_INTERNAL")}
    env.update({"AUDITMESH_LISTEN": "127.0.0.1:0", "AUDITMESH_METRICS_LISTEN": "off"})
    try:
        done = subprocess.run([sys.executable, "-m", "services.text.server", "--config", "config/text.yaml"], cwd=ROOT,
                              env=env, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("the text service started serving without any internal secret")
    assert done.returncode == 2
    assert "AUDITMESH_INTERNAL_SECRET" in done.stderr and "auth.secret_file" in done.stderr


def test_secrets_are_never_shown() -> None:
    secret = SharedSecret(SECRET)
    assert SECRET not in repr(secret) and SECRET not in repr(InternalCredentials(secret, None))
    assert secret.matches(SECRET) and not secret.matches(SECRET[:-1]) and not secret.matches(None)
    _ = triton_aio  # the aio client is what the router uses (UpstreamClient)
