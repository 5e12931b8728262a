"""Domain errors shared by the services: the bottom of the house (no gRPC, no feature module).

Pure modules raise these; `services.common.status` maps them to gRPC status codes in one table.
Anything not in that table is a bug: it is logged with a traceback and returned as INTERNAL without
details (grpclib hides unknown errors behind UNKNOWN the same way).
"""

from __future__ import annotations



class AuditmeshError(Exception):
    """Base of expected, user-facing errors. The message is shown to the caller verbatim.

    `retry_after_s`, when set, is sent to the caller as google.rpc.RetryInfo."""

    retry_after_s: float | None = None


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


# Errors of the serving machinery (batchers, model tensors, image decoding). They keep their builtin
# bases (callers catch ValueError / RuntimeError) and live here so this module imports nothing above it.


class QueueFullError(RuntimeError):
    """The batcher's queue is at its limit; the caller should back off and retry."""


class BatcherClosedError(RuntimeError):
    """The batcher no longer accepts work (the service is shutting down)."""


class BatchResultError(RuntimeError):
    """`run_batch` returned a different number of results than items it was given (a bug)."""


class InvalidInputError(ValueError):
    """A request's tensors are malformed (wrong name, type, shape or undecodable content).

    The message must say what is wrong and what is expected; it is returned to the caller verbatim
    with status INVALID_ARGUMENT.
    """


class ImageRejectedError(ValueError):
    """The bytes are not an acceptable image. The message says why and names the limit."""
