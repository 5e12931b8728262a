"""Issue 12 item 2: one 31 MB ModelInfer sent straight to the text service made 93 % of router text
items fail with DEADLINE_EXCEEDED for over a minute. The modality services now refuse requests over
their per-request limits at once, so router text items keep being answered meanwhile."""

from __future__ import annotations

import struct
import threading
import time

import grpc
import pytest
from auditmesh.v1 import moderation_pb2 as pb
from auditmesh.v1 import moderation_pb2_grpc as pb_grpc
from tritonclient.grpc import service_pb2, service_pb2_grpc

from tests.security.inputs import KEY, auth
from tests.stubs import item

REFUSED = (grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.INVALID_ARGUMENT)


def text_request(rows: list[bytes]) -> service_pb2.ModelInferRequest:
    request = service_pb2.ModelInferRequest(model_name="text_moderation")
    request.inputs.add(name="TEXT", datatype="BYTES", shape=[len(rows), 1])
    request.raw_input_contents.append(b"".join(struct.pack("<I", len(row)) + row for row in rows))
    return request


def refusal(kserve: service_pb2_grpc.GRPCInferenceServiceStub, request: service_pb2.ModelInferRequest) -> tuple[grpc.StatusCode, float]:
    started = time.monotonic()
    try:
        kserve.ModelInfer(request, timeout=20)
    except grpc.RpcError as error:
        return error.code(), time.monotonic() - started
    return grpc.StatusCode.OK, time.monotonic() - started


def test_a_31_megabyte_model_infer_is_refused_at_once_and_router_text_keeps_flowing(
        text_kserve: service_pb2_grpc.GRPCInferenceServiceStub, stub: pb_grpc.ModerationServiceStub) -> None:
    outcome: list[tuple[grpc.StatusCode, float]] = []
    attack = threading.Thread(target=lambda: outcome.append(refusal(text_kserve, text_request([b"a" * 31_000_000]))))
    answered, failed = 0, []
    attack.start()
    until = time.monotonic() + 6.0
    while time.monotonic() < until:
        try:
            response = stub.Moderate(pb.ModerateRequest(request_id="t", item=item("have a nice day")),
                                     metadata=auth(KEY), timeout=2.0)
            answered += 1 if response.decision == pb.ALLOW and not response.degraded else 0
        except grpc.RpcError as error:
            failed.append(error.code())
        time.sleep(0.05)
    attack.join(30)
    code, seconds = outcome[0]
    assert code in REFUSED and seconds < 3.0, outcome
    assert not failed and answered >= 20, (answered, failed)


@pytest.mark.parametrize("rows, limit", [([b"b" * 7_000_000], "max_row_bytes"),
                                         ([b"hi"] * 5000, "max_rows"),
                                         ([b"c" * 120_000] * 40, "max_request_bytes")],
                         ids=["one-huge-row", "many-rows", "over-the-request-bytes"])
def test_over_limit_requests_are_refused_quickly_naming_the_limit(
        text_kserve: service_pb2_grpc.GRPCInferenceServiceStub, rows: list[bytes], limit: str) -> None:
    started = time.monotonic()
    with pytest.raises(grpc.RpcError) as raised:
        text_kserve.ModelInfer(text_request(rows), timeout=20)
    assert raised.value.code() in REFUSED and time.monotonic() - started < 3.0, raised.value
    assert limit in (raised.value.details() or ""), raised.value.details()
