"""auditmesh.client.errors: the status, message and RetryInfo of a failed call or item."""

from __future__ import annotations

import grpc

from auditmesh.client.errors import from_rpc_error, from_status, status_code
from services.common.status import status_with_retry


class FailedCall(grpc.RpcError):
    """What grpc raises for a failed call: code, details, trailing metadata."""

    def __init__(self, code: grpc.StatusCode, details: str, trailers: tuple[tuple[str, str | bytes], ...] = ()) -> None:
        self._code, self._details, self._trailers = code, details, trailers

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details

    def trailing_metadata(self) -> tuple[tuple[str, str | bytes], ...]:
        return self._trailers


def test_a_failed_call_carries_the_retry_info_of_its_status_details_trailer() -> None:
    status = status_with_retry(grpc.StatusCode.RESOURCE_EXHAUSTED.value[0], "over quota", 0.25)
    error = from_rpc_error(FailedCall(grpc.StatusCode.RESOURCE_EXHAUSTED, "over quota",
                                      (("grpc-status-details-bin", status.SerializeToString()),)))
    assert error.code is grpc.StatusCode.RESOURCE_EXHAUSTED and error.message == "over quota"
    assert error.retry_after_s == 0.25


def test_a_failed_call_without_details_or_with_a_garbled_trailer_has_no_retry_hint() -> None:
    assert from_rpc_error(FailedCall(grpc.StatusCode.CANCELLED, "")).retry_after_s is None
    garbled = FailedCall(grpc.StatusCode.UNAVAILABLE, "x", (("grpc-status-details-bin", b"\xff\xff\xff"),))
    assert from_rpc_error(garbled).code is grpc.StatusCode.UNAVAILABLE


def test_an_item_status_maps_to_its_code_and_hint() -> None:
    error = from_status(status_with_retry(grpc.StatusCode.INVALID_ARGUMENT.value[0], "empty text", None), "it-1")
    assert (error.code, error.message, error.retry_after_s, error.item_id) == (
        grpc.StatusCode.INVALID_ARGUMENT, "empty text", None, "it-1")
    assert status_code(999) is grpc.StatusCode.UNKNOWN
