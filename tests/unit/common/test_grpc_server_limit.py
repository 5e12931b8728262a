"""`server.max_concurrent_rpcs`: a real loopback GrpcService answers calls over its limit with
RESOURCE_EXHAUSTED at once (before any handler runs), and the health probe counts a busy server alive."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from services.common import healthcheck
from services.common.grpc_server import GrpcService
from services.common.service_config import ServerConfig

METHOD = "/test.Slow/Wait"


def _register_slow(release: asyncio.Event, entered: list[int]) -> object:
    async def wait(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        entered.append(1)
        await release.wait()
        return b"done"

    handler = grpc.unary_unary_rpc_method_handler(wait)  # bytes in, bytes out: no (de)serialisers
    generic = grpc.method_handlers_generic_handler("test.Slow", {"Wait": handler})
    return lambda server: server.add_generic_rpc_handlers((generic,))


async def test_calls_over_the_limit_are_refused_at_once_and_never_reach_the_handler() -> None:
    release, entered = asyncio.Event(), list[int]()
    service = GrpcService("limited", ServerConfig("127.0.0.1:0", max_concurrent_rpcs=2), service_names=[],
                          register=_register_slow(release, entered))  # type: ignore[arg-type]
    port = await service.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            call = channel.unary_unary(METHOD)
            held = [asyncio.ensure_future(call(b"", timeout=10)) for _ in range(2)]
            while len(entered) < 2:
                await asyncio.sleep(0.01)
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await call(b"", timeout=10)
            # Refused at once: a queued call could only end at its deadline (DEADLINE_EXCEEDED), since the
            # two held calls finish only after `release` below. No wall-clock bound (timing lives in bench/).
            assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert len(entered) == 2
            # the health probe finds the process at its limit: busy, alive
            assert await asyncio.to_thread(healthcheck.main, [f"127.0.0.1:{port}"]) == 0
            release.set()
            assert [await task for task in held] == [b"done", b"done"]
            assert await call(b"", timeout=10) == b"done"  # a slot is free again
    finally:
        await service.stop()


def test_negative_limit_is_rejected() -> None:
    with pytest.raises(ValueError, match="max_concurrent_rpcs"):
        ServerConfig("127.0.0.1:0", max_concurrent_rpcs=-1)
