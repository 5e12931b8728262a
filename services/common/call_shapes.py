"""gRPC's four call shapes (unary or streaming request x unary or streaming response), for server
interceptors that wrap a method's handler: which behaviour a handler holds and how to make a new
handler of the same shape around a wrapped behaviour.

Example::

    inner = behavior_of(handler)           # handler.unary_unary, .unary_stream, ... whichever is set

    async def wrapped(request, context):   # (for a unary-response method)
        ...
        return await inner(request, context)

    return same_shape(handler, wrapped)    # a handler with the same serializers and streaming flags
"""

from __future__ import annotations

from typing import Any, Callable

import grpc

__all__ = ["behavior_of", "same_shape"]

#: (request streaming, response streaming) -> the gRPC helper that makes a handler of that shape.
_MAKERS: dict[tuple[bool, bool], Callable[..., grpc.RpcMethodHandler]] = {
    (False, False): grpc.unary_unary_rpc_method_handler, (False, True): grpc.unary_stream_rpc_method_handler,
    (True, False): grpc.stream_unary_rpc_method_handler, (True, True): grpc.stream_stream_rpc_method_handler}


def behavior_of(handler: grpc.RpcMethodHandler) -> Callable[..., Any]:
    """The servicer callable `handler` runs (the one of its four behaviour slots that is set)."""
    behavior = handler.unary_unary or handler.unary_stream or handler.stream_unary or handler.stream_stream
    if behavior is None:
        raise ValueError("a method handler with no behaviour")
    return behavior  # type: ignore[no-any-return]


def same_shape(handler: grpc.RpcMethodHandler, behavior: Callable[..., Any], *,
               request_deserializer: Callable[[bytes], Any] | None = None) -> grpc.RpcMethodHandler:
    """A handler of `handler`'s call shape and serializers running `behavior` (and, when given,
    `request_deserializer` in place of its own)."""
    make = _MAKERS[(bool(handler.request_streaming), bool(handler.response_streaming))]
    return make(behavior, request_deserializer=request_deserializer or handler.request_deserializer,
                response_serializer=handler.response_serializer)
