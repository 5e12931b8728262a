"""The grpc.aio server interceptor that enforces `services.common.internal_auth` on a modality service's
port, under the failed-auth throttle (`services.common.auth_guard`).

It wraps each method's handler so the check runs with the call's context (its metadata and peer)
before the servicer sees the request; a refused call ends with UNAUTHENTICATED, PERMISSION_DENIED or
(throttled) RESOURCE_EXHAUSTED + google.rpc.RetryInfo, through `services.common.status`.

Example::

    interceptor = InternalAuthInterceptor(credentials, AuthGuard(AuthThrottle(), metrics, surface="kserve"))
    GrpcService("text", config.server, ..., interceptors=[interceptor])
"""

from __future__ import annotations

import inspect
import logging
from typing import Any, AsyncIterator, Awaitable, Callable

import grpc

from services.common.auth_guard import AuthGuard
from services.common.call_shapes import behavior_of, same_shape
from services.common.internal_auth import OPEN_PREFIXES, InternalCredentials
from services.common.status import abort

log = logging.getLogger(__name__)


class InternalAuthInterceptor(grpc.aio.ServerInterceptor):
    """See the module docstring."""

    def __init__(self, credentials: InternalCredentials, guard: AuthGuard) -> None:
        self.credentials = credentials
        self.guard = guard

    async def intercept_service(self, continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
                                details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        method = details.method
        if handler is None or method.startswith(OPEN_PREFIXES):
            return handler

        async def check(context: grpc.aio.ServicerContext) -> None:
            try:
                self.guard.check(context.peer(), lambda: self.credentials.authorize(method, context.invocation_metadata()))
            except Exception as error:
                await abort(context, error, log)

        return _guarded(handler, check)


def _guarded(handler: grpc.RpcMethodHandler, check: Callable[[grpc.aio.ServicerContext], Awaitable[None]]) -> grpc.RpcMethodHandler:
    """`handler` with `check(context)` run first. The request side (one message or an iterator) passes
    through untouched; the response side decides the wrapper: a coroutine or an async generator."""
    inner = behavior_of(handler)
    if handler.response_streaming:
        async def streaming(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            await check(context)
            async for response in _stream(inner(request, context)):
                yield response
        return same_shape(handler, streaming)

    async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
        await check(context)
        return await _result(inner(request, context))
    return same_shape(handler, unary)


async def _result(value: Any) -> Any:
    """A unary handler's result: servicer methods are coroutines, generated defaults plain functions."""
    return await value if inspect.isawaitable(value) else value


async def _stream(value: Any) -> AsyncIterator[Any]:
    """A streaming handler's responses (an async generator, or a coroutine that writes and returns)."""
    if hasattr(value, "__aiter__"):
        async for response in value:
            yield response
    elif inspect.isawaitable(value):
        await value
    elif value is not None:
        for response in value:
            yield response
