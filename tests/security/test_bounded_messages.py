"""Issue 12 item 11: client input is echoed only within a bound, and error and degradation messages
carry neither another caller's error nor internal addresses (upstream host:port)."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Iterator

import grpc
import pytest
from auditmesh.v1 import moderation_pb2 as pb
from auditmesh.v1 import moderation_pb2_grpc as pb_grpc
from tritonclient.grpc import service_pb2, service_pb2_grpc

from services.launcher import Mesh, free_base_port
from tests.mesh_fixtures import running
from tests.security.inputs import CHANNEL_OPTIONS, KEY, auth, plain_png
from tests.stubs import item

#: What a status message may take: gRPC sends it in a trailer (8 KiB of metadata by default).
MAX_DETAILS_BYTES = 1024


def test_a_huge_policy_name_gets_a_bounded_error(stub: pb_grpc.ModerationServiceStub) -> None:
    request = pb.ModerateRequest(request_id="p", item=item("hello"), policy="é" * 1_000_000)
    with pytest.raises(grpc.RpcError) as raised:
        stub.Moderate(request, metadata=auth(KEY), timeout=30)
    assert raised.value.code() == grpc.StatusCode.PERMISSION_DENIED, raised.value
    assert len((raised.value.details() or "").encode()) <= MAX_DETAILS_BYTES


def test_a_huge_model_name_gets_a_bounded_error_from_a_modality_service(
        text_kserve: service_pb2_grpc.GRPCInferenceServiceStub) -> None:
    for call, request in [(text_kserve.ModelInfer, service_pb2.ModelInferRequest(model_name="m" * 1_000_000)),
                          (text_kserve.ModelMetadata, service_pb2.ModelMetadataRequest(name="ü" * 1_000_000))]:
        with pytest.raises(grpc.RpcError) as raised:
            call(request, timeout=30)
        assert raised.value.code() == grpc.StatusCode.NOT_FOUND, raised.value
        assert len((raised.value.details() or "").encode()) <= MAX_DETAILS_BYTES


@pytest.fixture(scope="module")
def router_without_vision(mesh: Mesh, tenants_file: Path) -> Iterator[Mesh]:
    """A second set of router lanes whose vision upstream is a port nobody listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        dead = int(probe.getsockname()[1])
    env = {"AUDITMESH_TENANTS_FILE": str(tenants_file), "AUDITMESH_VISION_URL": f"127.0.0.1:{dead}",
           "AUDITMESH_TEXT_URL": mesh.address("text"), "AUDITMESH_OCR_URL": mesh.address("ocr")}
    routers = Mesh(base_port=free_base_port(), extra_env=env)
    with running(routers, *routers.routers):
        yield routers


def test_a_degradation_reason_names_no_internal_address(router_without_vision: Mesh) -> None:
    with grpc.insecure_channel(router_without_vision.address("router"), options=CHANNEL_OPTIONS) as channel:
        stub = pb_grpc.ModerationServiceStub(channel)
        response = stub.Moderate(pb.ModerateRequest(request_id="d", item=item("a photo", plain_png())),
                                 metadata=auth(KEY), timeout=30)
    vision = [d for d in response.degradations if d.stage == "vision"]
    assert response.degraded and vision, response
    for degradation in response.degradations:
        assert "127.0.0.1" not in degradation.reason and ":" + router_without_vision.extra_env[
            "AUDITMESH_VISION_URL"].rpartition(":")[2] not in degradation.reason, degradation
        assert "vision service" in vision[0].reason and len(degradation.reason) <= 200, degradation
