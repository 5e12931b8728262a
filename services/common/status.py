"""The one place that maps domain errors to gRPC status codes, for every servicer in the mesh.

`call_status` wraps a servicer method's body: an expected error (`STATUS_TABLE`) becomes its status with
the error's message (and `google.rpc.RetryInfo` where the error carries a retry hint); anything else is
a bug: logged with a traceback and answered INTERNAL without details.

Example::

    async def Moderate(self, request, context):
        async with call_status(context, log):
            return await self._moderate(request)
"""

from __future__ import annotations

import asyncio
import logging
from types import TracebackType

import grpc
from google.protobuf import duration_pb2
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

from services.common.errors import (AlreadyExistsError, AuditmeshError, BatcherClosedError, ConflictError, DeadlineExceededError,
                                    FailedPreconditionError, ImageRejectedError, InvalidInputError,
                                    InvalidRequestError, LimitExceededError, NotFoundError, PermissionDeniedError,
                                    QueueFullError, UnauthenticatedError, UnavailableError)

#: Checked in order; the first matching class wins.
STATUS_TABLE: tuple[tuple[type[BaseException], grpc.StatusCode], ...] = (
    (UnauthenticatedError, grpc.StatusCode.UNAUTHENTICATED),
    (PermissionDeniedError, grpc.StatusCode.PERMISSION_DENIED),
    (InvalidRequestError, grpc.StatusCode.INVALID_ARGUMENT),
    (InvalidInputError, grpc.StatusCode.INVALID_ARGUMENT),
    (ImageRejectedError, grpc.StatusCode.INVALID_ARGUMENT),
    (LimitExceededError, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (QueueFullError, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (DeadlineExceededError, grpc.StatusCode.DEADLINE_EXCEEDED),
    (TimeoutError, grpc.StatusCode.DEADLINE_EXCEEDED),
    (BatcherClosedError, grpc.StatusCode.UNAVAILABLE),
    (UnavailableError, grpc.StatusCode.UNAVAILABLE),
    (NotFoundError, grpc.StatusCode.NOT_FOUND),
    (AlreadyExistsError, grpc.StatusCode.ALREADY_EXISTS),
    (FailedPreconditionError, grpc.StatusCode.FAILED_PRECONDITION),
    (ConflictError, grpc.StatusCode.ABORTED),
)


#: Retry hint (seconds) when a batcher queue is full.
QUEUE_FULL_RETRY_S = 0.1
#: Longest error message sent to a caller: messages may quote client input, which must not make the
#: error response itself too large.
MAX_MESSAGE_CHARS = 512
#: ... and in UTF-8 bytes: gRPC sends the message percent-encoded in a trailer (8 KiB of metadata by
#: default), so 512 characters of non-ASCII text must not come near that.
MAX_MESSAGE_BYTES = 1000
#: Longest piece of a client's string quoted in a message (`quoted`).
MAX_QUOTED_CHARS = 64


def status_for(error: BaseException) -> grpc.StatusCode | None:
    """The status code for an expected error, or None if `error` is a bug."""
    for error_type, code in STATUS_TABLE:
        if isinstance(error, error_type):
            return code
    return None


def code_for(error: BaseException) -> grpc.StatusCode:
    """The status an error ends a call with: CANCELLED for a cancelled call, INTERNAL for a bug."""
    if isinstance(error, asyncio.CancelledError):
        return grpc.StatusCode.CANCELLED
    return status_for(error) or grpc.StatusCode.INTERNAL


def retry_after_s(error: BaseException) -> float | None:
    """Seconds a client should wait before retrying, for errors that carry a hint (else None)."""
    if isinstance(error, AuditmeshError) and error.retry_after_s is not None:
        return error.retry_after_s
    if isinstance(error, QueueFullError):
        return QUEUE_FULL_RETRY_S
    return None


def bounded(message: str) -> str:
    """`message` cut to MAX_MESSAGE_CHARS characters and MAX_MESSAGE_BYTES UTF-8 bytes (with a marker),
    so echoed input cannot blow up a response.

    Example::

        len(bounded("é" * 10_000).encode())   # <= 1000
    """
    if len(message) <= MAX_MESSAGE_CHARS and len(message.encode("utf-8", "replace")) <= MAX_MESSAGE_BYTES:
        return message
    marker = f"... ({len(message)} characters in all)"
    budget = MAX_MESSAGE_BYTES - len(marker)
    cut = message[:MAX_MESSAGE_CHARS].encode("utf-8", "replace")[:budget].decode("utf-8", "ignore")
    return cut + marker


def quoted(value: str, limit: int = MAX_QUOTED_CHARS) -> str:
    """`repr(value)` of at most `limit` characters of it, saying how long it was if cut: for echoing a
    client's string (a name, an id) inside a message.

    Example::

        quoted("x" * 1000, limit=3)   # "'xxx'... (1000 characters)"
    """
    if len(value) <= limit:
        return repr(value)
    return f"{value[:limit]!r}... ({len(value)} characters)"


def describe(error: BaseException, log: logging.Logger) -> tuple[grpc.StatusCode, str]:
    """The status and caller-facing message for `error`; logs a bug with its traceback."""
    code = status_for(error)
    if code is None:
        log.error("unexpected error", exc_info=error)
        return grpc.StatusCode.INTERNAL, "internal error (see the service log)"
    log.info("request rejected: %s: %s", code.name, bounded(str(error)))
    return code, bounded(str(error))


def status_with_retry(code: int, message: str, retry_after: float | None) -> status_pb2.Status:
    """A google.rpc.Status; with `retry_after` (seconds), carrying a google.rpc.RetryInfo detail."""
    status = status_pb2.Status(code=code, message=message)
    if retry_after is not None:
        delay = duration_pb2.Duration()
        delay.FromNanoseconds(int(retry_after * 1e9))
        status.details.add().Pack(error_details_pb2.RetryInfo(retry_delay=delay))
    return status


async def abort(context: grpc.aio.ServicerContext, error: BaseException, log: logging.Logger) -> None:
    """Fail the call with the error's status; errors with a retry hint carry google.rpc.RetryInfo."""
    code, message = describe(error, log)
    retry_after = retry_after_s(error)
    if retry_after is None:
        await context.abort(code, message)
    await context.abort_with_status(rpc_status.to_status(status_with_retry(code.value[0], message, retry_after)))


class call_status:  # noqa: N801 - used as a context manager, named like one
    """`async with call_status(context, log):` ends the call with the status of any error raised inside.

    Cancellation passes through untouched; gRPC's own abort (an error already carrying a status)
    too. Used by every servicer, so errors map to statuses in one place.
    """

    def __init__(self, context: grpc.aio.ServicerContext, log: logging.Logger) -> None:
        self._context = context
        self._log = log

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        traceback: TracebackType | None) -> None:
        if error is not None and isinstance(error, Exception) and not _is_abort(error):
            await abort(self._context, error, self._log)  # raises: the call ends with the error's status


def _is_abort(error: BaseException) -> bool:
    """True for the exception grpc.aio raises from `context.abort` (already carries its status)."""
    return type(error).__name__ == "AbortError" and type(error).__module__.startswith("grpc")


__all__ = ["MAX_MESSAGE_BYTES", "MAX_MESSAGE_CHARS", "MAX_QUOTED_CHARS", "QUEUE_FULL_RETRY_S", "quoted", "STATUS_TABLE", "abort", "bounded", "call_status", "code_for",
           "describe", "retry_after_s", "status_for", "status_with_retry"]
