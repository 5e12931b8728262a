"""Issue 12 item 3: one undecodable message hung a ModerateStream forever (no more answers, the
accepted messages dropped, the handler alive). The proto promises an error response for a bad
message and a stream that goes on."""

from __future__ import annotations

import time

import grpc
from auditmesh.v1 import moderation_pb2 as pb

from tests.security.inputs import KEY, MODERATE_STREAM, auth
from tests.stubs import item


def request(request_id: str, text: str) -> bytes:
    return bytes(pb.ModerateRequest(request_id=request_id, item=item(text, item_id=request_id)).SerializeToString())


def test_a_bad_message_gets_its_error_and_the_stream_goes_on(router_channel: grpc.Channel) -> None:
    messages = [request("a", "see you at the match on sunday"), b"\xff\xff\xff\xff", request("b", "thanks, that helped a lot"),
                b"\x0a\x02\xff\xfe", request("c", "you are a worthless idiot")]
    stream = router_channel.stream_stream(MODERATE_STREAM, request_serializer=None, response_deserializer=None)
    started = time.monotonic()
    call = stream(iter(messages), metadata=auth(KEY), timeout=60)
    responses = [pb.ModerateResponse.FromString(raw) for raw in call]
    assert call.code() == grpc.StatusCode.OK, call.details()
    assert time.monotonic() - started < 30
    by_id = {r.request_id: r for r in responses if r.request_id}
    assert set(by_id) == {"a", "b", "c"} and len(responses) == 5, responses
    assert by_id["a"].decision == pb.ALLOW and by_id["c"].decision == pb.BLOCK
    errors = [r for r in responses if not r.request_id]
    assert [e.error.code for e in errors] == [grpc.StatusCode.INVALID_ARGUMENT.value[0]] * 2
    assert all("auditmesh.v1.ModerateRequest" in e.error.message for e in errors)
