"""The floor under the router's per-item CPU: what grpc.aio itself costs a server per text item, by
how items arrive (one per `Moderate`, 32 per `ModerateBatch`, one per `ModerateStream` message), with
handlers that do no work at all. Prints JSON.

    python -m bench.grpc_floor [--items 6000] [--rounds 5]

A server process serves auditmesh.v1.ModerationService with handlers that answer each item ALLOW at
once (the stream handler: an async generator over the request iterator, as simple as it gets); this
process sends `--items` items by each path, closed loop with 64 items outstanding (2 batch calls), and
reads the server's CPU time from /proc. `server_us_per_item` (median of rounds) is gRPC's own work:
reading, parsing, serialising, writing and the completion-queue round trips. Compare it with
`bench.router_cpu`: a stream message costs at least `stream - batch` more than a batch item,
whatever the servicer does.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import statistics
import sys
from typing import Any, AsyncIterator, Awaitable, Callable, Sequence

import grpc
from auditmesh.v1 import moderation_pb2 as pb
from auditmesh.v1 import moderation_pb2_grpc as pb_grpc

from bench.cpu import process_cpu_s
from bench.machine import CpuAccount, machine

IN_FLIGHT = 64
BATCH_ITEMS = 32
TEXT = "hey, are you coming to the match tonight? bring snacks"


class _Idle(pb_grpc.ModerationServiceServicer):
    """Answers every item ALLOW at once."""

    async def Moderate(self, request: pb.ModerateRequest, context: grpc.aio.ServicerContext) -> pb.ModerateResponse:
        return pb.ModerateResponse(request_id=request.request_id, item_id=request.item.id, decision=pb.ALLOW)

    async def ModerateBatch(self, request: pb.ModerateBatchRequest,
                            context: grpc.aio.ServicerContext) -> pb.ModerateBatchResponse:
        return pb.ModerateBatchResponse(results=[pb.ModerateResponse(item_id=item.id, decision=pb.ALLOW)
                                                 for item in request.items])

    async def ModerateStream(self, request_iterator: AsyncIterator[pb.ModerateRequest],
                             context: grpc.aio.ServicerContext) -> AsyncIterator[pb.ModerateResponse]:
        async for request in request_iterator:
            yield pb.ModerateResponse(request_id=request.request_id, item_id=request.item.id, decision=pb.ALLOW)


def _serve(ports: Any) -> None:
    async def serve() -> None:
        server = grpc.aio.server()
        pb_grpc.add_ModerationServiceServicer_to_server(_Idle(), server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        ports.put(port)
        await server.wait_for_termination()
    asyncio.run(serve())


async def _stream(stub: Any, items: Sequence[Any]) -> None:
    call = stub.ModerateStream(timeout=120)
    window = asyncio.Semaphore(IN_FLIGHT)

    async def write() -> None:
        for i, item in enumerate(items):
            await window.acquire()
            await call.write(pb.ModerateRequest(request_id=str(i), item=item))
        await call.done_writing()

    writer = asyncio.create_task(write())
    for _ in items:
        await call.read()
        window.release()
    await writer


async def _batch(stub: Any, items: Sequence[Any]) -> None:
    chunks = iter([items[i:i + BATCH_ITEMS] for i in range(0, len(items), BATCH_ITEMS)])

    async def work() -> None:
        for chunk in chunks:
            await stub.ModerateBatch(pb.ModerateBatchRequest(items=chunk), timeout=30)
    await asyncio.gather(*(work() for _ in range(IN_FLIGHT // BATCH_ITEMS)))


async def _moderate(stub: Any, items: Sequence[Any]) -> None:
    cursor = iter(items)

    async def work() -> None:
        for item in cursor:
            await stub.Moderate(pb.ModerateRequest(item=item), timeout=30)
    await asyncio.gather(*(work() for _ in range(IN_FLIGHT)))


async def measure(port: int, pid: int, *, items: int, rounds: int) -> dict[str, Any]:
    """Server CPU µs per item per path (median of `rounds`, and every round)."""
    payload = [pb.Item(id=f"t{i}", parts=[pb.Part(text=TEXT)]) for i in range(items)]
    paths: dict[str, list[float]] = {"moderate": [], "batch": [], "stream": []}
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = pb_grpc.ModerationServiceStub(channel)
        senders: dict[str, Callable[[Sequence[Any]], Awaitable[None]]] = {
            "moderate": lambda chunk: _moderate(stub, chunk), "batch": lambda chunk: _batch(stub, chunk),
            "stream": lambda chunk: _stream(stub, chunk)}
        for send in senders.values():  # warm-up
            await send(payload[:max(1, items // 10)])
        for _ in range(rounds):
            for path, send in senders.items():
                before = process_cpu_s(pid) or 0.0
                await send(payload)
                paths[path].append(round(((process_cpu_s(pid) or 0.0) - before) * 1e6 / items, 1))
    batch = statistics.median(paths["batch"])
    return {path: {"server_us_per_item": statistics.median(runs), "rounds": runs,
                   "minus_batch_item_us": round(statistics.median(runs) - batch, 1)} for path, runs in paths.items()}


def run(items: int, rounds: int) -> dict[str, Any]:
    account = CpuAccount.start()
    ports: Any = multiprocessing.get_context("spawn").Queue()
    server = multiprocessing.get_context("spawn").Process(target=_serve, args=(ports,), daemon=True)
    server.start()
    try:
        port = ports.get(timeout=60)
        paths = asyncio.run(measure(port, server.pid or 0, items=items, rounds=rounds))
    finally:
        server.kill()
        server.join()
    report: dict[str, Any] = {"machine": machine(), "items": items, "rounds": rounds, "in_flight": IN_FLIGHT,
                              "batch_items_per_call": BATCH_ITEMS, "paths": paths}
    report["machine"]["foreign_cpu_share"] = account.foreign_cpu_share()
    return report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.grpc_floor", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--items", type=int, default=6000, help="items per path per round (default 6000)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds, each over every path (default 5)")
    args = parser.parse_args(argv)
    report = run(args.items, args.rounds)
    report["command"] = " ".join(["python -m bench.grpc_floor", *(argv if argv is not None else sys.argv[1:])])
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
