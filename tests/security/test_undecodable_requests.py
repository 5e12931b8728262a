"""Issue 12 item 9: an undecodable protobuf, or invalid UTF-8 in a string field, is INVALID_ARGUMENT
with a short message (it was UNKNOWN with a 730-byte traceback per call, before authentication),
logged at most at info and rate-limited."""

from __future__ import annotations

import logging

import grpc
import pytest
from auditmesh.v1 import moderation_pb2 as pb
from grpc_health.v1 import health_pb2

from services.common.grpc_server import GrpcService
from services.common.service_config import ServerConfig
from tests.security.inputs import KEY, MODEL_INFER, MODERATE, MODERATE_BATCH, auth, raw_unary

#: Field 1 of every message below is a string: 0x0a = field 1, length-delimited.
BAD_UTF8 = b"\x0a\x02\xff\xfe"
GARBAGE = [b"\xff\xff\xff\xff\xff", b"\x0a\x7fshort", b"\x12\x05\x0a\x03", BAD_UTF8]


def valid_request_cut_short() -> bytes:
    data = pb.ModerateRequest(request_id="r", item=pb.Item(id="i", parts=[pb.Part(text="hello")])).SerializeToString()
    return bytes(data[:-3])


@pytest.mark.parametrize("method", [MODERATE, MODERATE_BATCH])
@pytest.mark.parametrize("body", [*GARBAGE, valid_request_cut_short()], ids=lambda b: b[:6].hex())
def test_router_answers_undecodable_requests_with_invalid_argument(router_channel: grpc.Channel, method: str,
                                                                   body: bytes) -> None:
    with pytest.raises(grpc.RpcError) as raised:
        raw_unary(router_channel, method)(body, metadata=auth(KEY), timeout=10)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT, raised.value
    details = raised.value.details() or ""
    assert "auditmesh.v1." in details and len(details) < 300, details


def test_a_modality_service_answers_undecodable_requests_with_invalid_argument(text_channel: grpc.Channel) -> None:
    for body in GARBAGE:
        with pytest.raises(grpc.RpcError) as raised:
            raw_unary(text_channel, MODEL_INFER)(body, timeout=10)
        assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT, raised.value
        assert "inference.ModelInferRequest" in (raised.value.details() or "")


async def test_undecodable_requests_are_logged_at_info_at_most_once_a_second(caplog: pytest.LogCaptureFixture) -> None:
    service = GrpcService("probe", ServerConfig("127.0.0.1:0"), service_names=[], register=lambda server: None)
    port = await service.start()
    caplog.set_level(logging.DEBUG)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            check = channel.unary_unary("/grpc.health.v1.Health/Check", request_serializer=None, response_deserializer=None)
            for _ in range(50):
                with pytest.raises(grpc.aio.AioRpcError) as raised:
                    await check(BAD_UTF8, timeout=5)
                assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            ok = health_pb2.HealthCheckResponse.FromString(
                await check(health_pb2.HealthCheckRequest().SerializeToString(), timeout=5))
            assert ok.status == health_pb2.HealthCheckResponse.SERVING
    finally:
        await service.stop()
    loud = [r for r in caplog.records if r.levelno > logging.INFO]
    assert not loud, [r.getMessage() for r in loud]
    notes = [r for r in caplog.records if "undecodable" in r.getMessage()]
    assert 1 <= len(notes) <= 2, [r.getMessage() for r in notes]
