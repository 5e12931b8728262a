"""Domain errors shared by the services, and the one table that maps them to gRPC status codes.

Pure modules raise these (or the errors named in the table); servers call `status_for` in one place.
Anything not in the table is a bug: it is logged with a traceback and returned as INTERNAL without
details (grpclib hides unknown errors behind UNKNOWN the same way).
"""

from __future__ import annotations

import grpc

from services.common.batcher import BatcherClosedError, QueueFullError
from services.common.image_decode import ImageRejectedError
from services.common.model_api import InvalidInputError


class AuditmeshError(Exception):
    """Base of expected, user-facing errors. The message is shown to the caller verbatim."""


class UnauthenticatedError(AuditmeshError):
    """No API key, or a key that belongs to no tenant."""


class PermissionDeniedError(AuditmeshError):
    """The tenant may not use what it asked for (e.g. another tenant's policy)."""


class InvalidRequestError(AuditmeshError):
    """The request is malformed; the message names the field."""


class LimitExceededError(AuditmeshError):
    """The request is over a size limit; the message gives the limit."""


class DeadlineExceededError(AuditmeshError):
    """The deadline expired before the work could finish."""


class UnavailableError(AuditmeshError):
    """A dependency is down and the policy says the request cannot be answered without it."""


class NotFoundError(AuditmeshError):
    """A named model or policy does not exist."""


class AlreadyExistsError(AuditmeshError):
    """An immutable thing (e.g. a policy version id) already exists with different content."""


class ConflictError(AuditmeshError):
    """Something changed since the caller read it (e.g. a policy pointer moved by another admin)."""


class FailedPreconditionError(AuditmeshError):
    """The request is valid but the system is not in a state to do it (e.g. a model file that does not
    load, a tenants document naming a policy with no active version)."""


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


def status_for(error: BaseException) -> grpc.StatusCode | None:
    """The status code for an expected error, or None if `error` is a bug."""
    for error_type, code in STATUS_TABLE:
        if isinstance(error, error_type):
            return code
    return None
