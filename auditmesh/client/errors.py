"""The one exception the client raises for a refused or failed item, and where it comes from.

Every failure a caller sees is a `ModerationError` carrying the gRPC status code, the router's message
and, when the router sent a `google.rpc.RetryInfo`, how long it asked the client to wait. The same
type covers a whole call that failed (the call's status and trailers) and one item of a
`ModerateBatch` / `ModerateStream` that failed (that item's `google.rpc.Status`), so a caller handles
both alike.

Example::

    try:
        verdict = await client.moderate(text="hello")
    except ModerationError as error:
        if error.code is grpc.StatusCode.INVALID_ARGUMENT:
            print("fix the item:", error.message)
"""

from __future__ import annotations

from typing import Any

import grpc


class ModerationError(Exception):
    """An item (or a whole call) the router refused or could not finish.

    `code` is the gRPC status, `message` the router's (actionable) message, `retry_after_s` the
    router's google.rpc.RetryInfo hint (None when it sent none), `item_id` the item's id when known,
    `attempts` how many times the client sent it (retries included).
    """

    def __init__(self, code: grpc.StatusCode, message: str, *, retry_after_s: float | None = None,
                 item_id: str = "", attempts: int = 1) -> None:
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message
        self.retry_after_s = retry_after_s
        self.item_id = item_id
        self.attempts = attempts

    def with_attempts(self, attempts: int) -> ModerationError:
        """The same error, recording that the item was sent `attempts` times."""
        return ModerationError(self.code, self.message, retry_after_s=self.retry_after_s, item_id=self.item_id,
                               attempts=attempts)


class BatchShapeError(ModerationError):
    """The router answered a ModerateBatch with a different number of results than items sent (a
    protocol violation, never expected): every item of that call fails with INTERNAL."""

    def __init__(self, sent: int, received: int) -> None:
        super().__init__(grpc.StatusCode.INTERNAL, f"sent {sent} items and received {received} results")


class ClientClosedError(ModerationError):
    """The client (or chat) was closed before this item was answered."""

    def __init__(self, what: str = "client") -> None:
        super().__init__(grpc.StatusCode.CANCELLED, f"the {what} is closed")


def status_code(number: int) -> grpc.StatusCode:
    """The gRPC status for a numeric google.rpc code (UNKNOWN for a number gRPC does not define).

    Example::

        >>> status_code(8).name
        'RESOURCE_EXHAUSTED'
    """
    return _BY_NUMBER.get(number, grpc.StatusCode.UNKNOWN)


_BY_NUMBER: dict[int, grpc.StatusCode] = {code.value[0]: code for code in grpc.StatusCode}


def retry_delay_s(status: Any) -> float | None:
    """The delay of the first google.rpc.RetryInfo in a google.rpc.Status's details (None without one)."""
    from google.rpc import error_details_pb2

    for detail in status.details:
        if detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            info = error_details_pb2.RetryInfo()
            detail.Unpack(info)
            return float(info.retry_delay.ToNanoseconds()) / 1e9
    return None


def from_status(status: Any, item_id: str = "") -> ModerationError:
    """The error for one item's google.rpc.Status (a ModerateBatch or ModerateStream result's `error`)."""
    return ModerationError(status_code(int(status.code)), str(status.message), retry_after_s=retry_delay_s(status),
                           item_id=item_id)


def from_rpc_error(error: grpc.RpcError) -> ModerationError:
    """The error for a failed call (sync or grpc.aio): its status, details and the RetryInfo in its
    `grpc-status-details-bin` trailer (a google.rpc.Status, as grpcio-status writes it)."""
    code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
    details = error.details() if hasattr(error, "details") else str(error)
    trailers = error.trailing_metadata() if hasattr(error, "trailing_metadata") else None
    return ModerationError(code, details or "", retry_after_s=_trailer_retry_delay_s(trailers))


STATUS_DETAILS_KEY = "grpc-status-details-bin"


def _trailer_retry_delay_s(trailers: Any) -> float | None:
    from google.protobuf.message import DecodeError
    from google.rpc import status_pb2

    for key, value in trailers or ():
        if key == STATUS_DETAILS_KEY and isinstance(value, bytes):
            status = status_pb2.Status()
            try:
                status.ParseFromString(value)
            except DecodeError:  # a garbled trailer must not hide the call's own status
                return None
            return retry_delay_s(status)
    return None


__all__ = ["BatchShapeError", "ClientClosedError", "ModerationError", "from_rpc_error", "from_status", "retry_delay_s",
           "status_code"]
