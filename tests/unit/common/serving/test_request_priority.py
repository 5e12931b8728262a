"""The KServe `priority` request parameter (Triton's semantics) as our services read it."""

from __future__ import annotations

from tritonclient.grpc import service_pb2

from services.common.serving.kserve_servicer import request_priority


def test_priority_parameter_is_read_and_absent_means_default() -> None:
    request = service_pb2.ModelInferRequest()
    assert request_priority(request) == 0
    request.parameters["priority"].uint64_param = 3  # what tritonclient's infer(priority=3) sends
    assert request_priority(request) == 3
    request.parameters["priority"].int64_param = -4
    assert request_priority(request) == 0  # nonsense is the default level, not an error
    request.parameters["priority"].string_param = "high"
    assert request_priority(request) == 0
