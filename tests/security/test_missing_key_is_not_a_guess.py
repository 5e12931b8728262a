"""Regression: calls with NO API key counted as failed guesses, so a client that forgot its key (or
the fuzz test's keyless calls) blocked every later call from its host, valid keys included, for the
throttle's window. A missing key is UNAUTHENTICATED and never throttles; wrong keys still do."""

from __future__ import annotations

import grpc
import pytest
from auditmesh.v1 import moderation_pb2 as pb
from auditmesh.v1 import moderation_pb2_grpc as pb_grpc

from tests.security.inputs import KEY


def test_many_keyless_calls_leave_the_host_unthrottled(router_channel: grpc.Channel) -> None:
    stub = pb_grpc.ModerationServiceStub(router_channel)
    request = pb.ModerateRequest(request_id="r", item=pb.Item(id="i", parts=[pb.Part(text="hello")]))
    for _ in range(40):  # twice config/router.yaml's auth_throttle.peer_failures
        with pytest.raises(grpc.RpcError) as refused:
            stub.Moderate(request, timeout=10)
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
    response = stub.Moderate(request, metadata=[("x-api-key", KEY)], timeout=30)
    assert response.decision == pb.ALLOW
