"""Undecodable requests get INVALID_ARGUMENT, not UNKNOWN plus a traceback.

gRPC parses each request message with the handler's `request_deserializer` before any servicer code
(or authentication) runs; a message that does not parse (garbage bytes, a truncated protobuf, invalid
UTF-8 in a string field) made grpc.aio log an ERROR with a traceback and answer UNKNOWN. The
`DecodeGuard` server interceptor wraps every handler's deserializer so that such a message becomes an
`UndecodableRequest` value instead, and wraps the handler so that:

* a unary-request call with one is answered INVALID_ARGUMENT with a short message naming the type;
* on a request stream listed in `tolerant_streams` the value reaches the servicer, which answers that
  message with an error and goes on (ModerateStream's contract); on any other request stream the call
  ends with INVALID_ARGUMENT.

Each one is logged at info, at most once per `log_interval_s` (with how many were not logged), since
a flood of them must not flood the log.

Example::

    server = grpc.aio.server(interceptors=[DecodeGuard(tolerant_streams={"/pkg.Svc/Chat"})])
"""

from __future__ import annotations

import inspect
import logging
import time
from dataclasses import dataclass
from typing import Any, AsyncIterator, Awaitable, Callable, Collection

import grpc

from services.common.call_shapes import behavior_of, same_shape

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class UndecodableRequest:
    """Stands in for a request message that could not be parsed. `message` is what the caller is told."""

    type_name: str

    @property
    def message(self) -> str:
        return (f"the request is not a valid {self.type_name} message: the protobuf could not be decoded "
                "(malformed wire format, or invalid UTF-8 in a string field)")


class RateLimitedNote:
    """Logs at info at most once per `interval_s`, saying how many notes were held back in between."""

    def __init__(self, logger: logging.Logger, interval_s: float = 1.0, clock: Callable[[], float] = time.monotonic) -> None:
        self._log = logger
        self._interval_s = interval_s
        self._clock = clock
        self._next = float("-inf")
        self._held = 0

    def note(self, text: str, *args: object) -> None:
        now = self._clock()
        if now < self._next:
            self._held += 1
            return
        held, self._held, self._next = self._held, 0, now + self._interval_s
        self._log.info(text + (" (and %d more not logged)" if held else ""), *args, *((held,) if held else ()))


def _type_name(deserializer: Callable[[bytes], Any]) -> str:
    owner = getattr(deserializer, "__self__", None)  # generated handlers pass `Message.FromString`
    descriptor = getattr(owner, "DESCRIPTOR", None)
    return str(getattr(descriptor, "full_name", "") or "request")


def guard_deserializer(deserializer: Callable[[bytes], Any],
                       on_undecodable: Callable[[UndecodableRequest], None] | None = None) -> Callable[[bytes], Any]:
    """`deserializer`, returning an UndecodableRequest instead of raising (and telling `on_undecodable`)."""
    type_name = _type_name(deserializer)

    def deserialize(data: bytes) -> Any:
        try:
            return deserializer(data)
        except Exception:  # DecodeError, or a UnicodeDecodeError from some protobuf builds
            request = UndecodableRequest(type_name)
            if on_undecodable is not None:
                on_undecodable(request)
            return request
    return deserialize


class DecodeGuard(grpc.aio.ServerInterceptor):
    """See the module docstring. Put it last in the interceptor list (it wraps the servicer itself).

    The guarded handler of each method is built once and reused for every call (the server asks the
    interceptors per call; building handlers per call cost every call its closures and checks)."""

    def __init__(self, tolerant_streams: Collection[str] = (), *, log_interval_s: float = 1.0) -> None:
        self._tolerant = frozenset(tolerant_streams)
        self._note = RateLimitedNote(log, log_interval_s)
        #: method -> (the handler the servicer registered, its guarded form)
        self._guarded: dict[str, tuple[grpc.RpcMethodHandler, grpc.RpcMethodHandler]] = {}

    async def intercept_service(self, continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
                                handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        if handler is None or handler.request_deserializer is None:
            return handler
        method = str(handler_call_details.method)
        cached = self._guarded.get(method)
        if cached is not None and cached[0] is handler:
            return cached[1]
        guarded = self._guard(method, handler)
        self._guarded[method] = (handler, guarded)
        return guarded

    def _guard(self, method: str, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
        if handler.request_streaming and method in self._tolerant:
            # The servicer sees the UndecodableRequest values itself: no wrapper around its request
            # stream (a generator layer per message); each is noted as it is decoded.
            def noted(request: UndecodableRequest) -> None:
                self._note.note("answered an undecodable %s on %s with an error; the stream goes on",
                                request.type_name, method)
            return same_shape(handler, behavior_of(handler),
                              request_deserializer=guard_deserializer(handler.request_deserializer, noted))
        wrap = self._refusing_stream if handler.request_streaming else self._unary
        behavior = wrap(method, behavior_of(handler))
        if behavior is None:
            return handler
        return same_shape(handler, behavior, request_deserializer=guard_deserializer(handler.request_deserializer))

    async def _refuse(self, method: str, request: UndecodableRequest, context: grpc.aio.ServicerContext) -> None:
        self._note.note("refused an undecodable %s on %s (INVALID_ARGUMENT)", request.type_name, method)
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, request.message)

    def _unary(self, method: str, inner: Callable[..., Any]) -> Callable[..., Any] | None:
        """The handler of a unary-request method, refusing an UndecodableRequest (None: leave it alone,
        e.g. a synchronous handler)."""
        if inspect.isasyncgenfunction(inner):
            async def streaming(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
                if isinstance(request, UndecodableRequest):
                    await self._refuse(method, request, context)
                async for response in inner(request, context):
                    yield response
            return streaming
        if inspect.iscoroutinefunction(inner):
            async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
                if isinstance(request, UndecodableRequest):
                    await self._refuse(method, request, context)
                return await inner(request, context)
            return unary
        return None

    def _refusing_stream(self, method: str, inner: Callable[..., Any]) -> Callable[..., Any] | None:
        """The handler of a request-streaming method that is not tolerant: the call ends at the first
        UndecodableRequest (None: leave it alone, e.g. a synchronous handler)."""
        async def refusing(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            async for request in requests:
                if isinstance(request, UndecodableRequest):
                    await self._refuse(method, request, context)
                yield request
        if inspect.isasyncgenfunction(inner):
            async def streaming(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
                async for response in inner(refusing(requests, context), context):
                    yield response
            return streaming
        if inspect.iscoroutinefunction(inner):
            async def unary(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> Any:
                return await inner(refusing(requests, context), context)
            return unary
        return None


__all__ = ["DecodeGuard", "RateLimitedNote", "UndecodableRequest", "guard_deserializer"]
