"""services/common/call_shapes.py: a wrapped handler keeps its call shape and serializers."""

from __future__ import annotations

from typing import Any, Callable

import grpc
import pytest

from services.common.call_shapes import behavior_of, same_shape


def _behavior(*_: Any) -> None:
    return None


def _serialize(value: Any) -> bytes:
    return b""


@pytest.mark.parametrize("make", [grpc.unary_unary_rpc_method_handler, grpc.unary_stream_rpc_method_handler,
                                  grpc.stream_unary_rpc_method_handler, grpc.stream_stream_rpc_method_handler])
def test_same_shape_keeps_the_call_shape_and_serializers(make: Callable[..., grpc.RpcMethodHandler]) -> None:
    handler = make(_behavior, request_deserializer=bytes, response_serializer=_serialize)
    assert behavior_of(handler) is _behavior

    def wrapped(*_: Any) -> None:
        return None

    copy = same_shape(handler, wrapped)
    assert (copy.request_streaming, copy.response_streaming) == (handler.request_streaming, handler.response_streaming)
    assert behavior_of(copy) is wrapped and copy.request_deserializer is bytes and copy.response_serializer is _serialize
    assert same_shape(handler, wrapped, request_deserializer=str).request_deserializer is str
