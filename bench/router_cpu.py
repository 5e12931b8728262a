"""Router CPU per text item, by how the items arrive: one per `Moderate` call, 32 per
`ModerateBatch` call, one per message of a `ModerateStream`, or single-item calls through
`auditmesh.client` (auto-batched). Prints JSON.

    python -m bench.router_cpu [--items 3000] [--in-flight 64] [--rounds 3] [--policy-profile fast]

Starts the real mesh (shipped configs, one realtime bench tenant). Each round sends `--items` text
items by each path in turn, closed loop with `--in-flight` items outstanding, and reads the router's
and the text service's CPU time (/proc) before and after: `router_us_per_item` is the router's CPU
per item, what the issue's "a stream message costs no more than a batch item" is about;
`text_batch_size` is the text service's mean batch size meanwhile (fewer, larger upstream calls
cost the router less per item). The median
over rounds is reported, with every round. The load generator shares the machine: read
`foreign_cpu_share` (other processes' share of the machine's CPU) before trusting a number.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Awaitable, Callable, Sequence

import grpc
from auditmesh.v1 import moderation_pb2 as pb
from auditmesh.v1 import moderation_pb2_grpc as pb_grpc

from auditmesh.client import AsyncClient
from bench.cpu import ProcessCpu
from bench.machine import CpuAccount, machine
from bench.meshes import auditmesh_mesh, modality_clients, running_mesh
from bench.modelstats import StatsProbe
from bench.payloads import BenchInputs
from bench.router_target import CHANNEL_OPTIONS
from bench.scenarios import REALTIME

PATHS = ("moderate", "batch", "stream", "client")
BATCH_ITEMS = 32


def _items(inputs: BenchInputs, count: int) -> list[Any]:
    texts = [text.decode("utf-8") for text in inputs.texts]
    return [pb.Item(id=f"t{i}", parts=[pb.Part(text=texts[i % len(texts)])]) for i in range(count)]


async def _workers(count: int, work: Callable[[int], Awaitable[None]]) -> None:
    await asyncio.gather(*(work(w) for w in range(count)))


async def send_moderate(stub: Any, items: Sequence[Any], in_flight: int, metadata: Any) -> None:
    cursor = iter(items)

    async def work(_: int) -> None:
        for item in cursor:
            await stub.Moderate(pb.ModerateRequest(item=item), metadata=metadata, timeout=30)

    await _workers(in_flight, work)


async def send_batch(stub: Any, items: Sequence[Any], in_flight: int, metadata: Any) -> None:
    chunks = iter([items[i:i + BATCH_ITEMS] for i in range(0, len(items), BATCH_ITEMS)])

    async def work(_: int) -> None:
        for chunk in chunks:
            await stub.ModerateBatch(pb.ModerateBatchRequest(items=chunk), metadata=metadata, timeout=30)

    await _workers(max(1, in_flight // BATCH_ITEMS), work)


async def send_stream(stub: Any, items: Sequence[Any], in_flight: int, metadata: Any) -> None:
    call = stub.ModerateStream(metadata=metadata, timeout=120)
    window = asyncio.Semaphore(in_flight)

    async def write() -> None:
        for i, item in enumerate(items):
            await window.acquire()
            await call.write(pb.ModerateRequest(request_id=str(i), item=item, deadline_ms=30000))
        await call.done_writing()

    writer = asyncio.create_task(write())
    answered = 0
    while answered < len(items):
        response = await call.read()
        if response is grpc.aio.EOF:
            raise RuntimeError(f"the stream ended after {answered} of {len(items)} answers")
        answered += 1
        window.release()
    await writer


async def send_client(client: AsyncClient, items: Sequence[Any], in_flight: int) -> None:
    texts = iter([item.parts[0].text for item in items])

    async def work(_: int) -> None:
        for text in texts:
            await client.moderate(text=text, timeout_s=30)

    await _workers(in_flight, work)


async def measure(address: str, cpu: ProcessCpu, probe: StatsProbe, inputs: BenchInputs, *, items: int,
                  in_flight: int, rounds: int) -> dict[str, Any]:
    metadata = (("x-api-key", REALTIME.key),)
    payload = _items(inputs, items)
    per_path: dict[str, list[dict[str, float]]] = {path: [] for path in PATHS}
    async with grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS) as channel, \
            AsyncClient([address], api_key=REALTIME.key, timeout_s=30) as client:
        stub = pb_grpc.ModerationServiceStub(channel)
        senders: dict[str, Callable[[], Awaitable[None]]] = {
            "moderate": lambda: send_moderate(stub, payload, in_flight, metadata),
            "batch": lambda: send_batch(stub, payload, in_flight, metadata),
            "stream": lambda: send_stream(stub, payload, in_flight, metadata),
            "client": lambda: send_client(client, payload, in_flight)}
        for path in PATHS:  # warm-up: connections, caches, the batch cost estimate
            await (senders[path]() if path != "stream" else send_stream(stub, payload[:200], in_flight, metadata))
        for round_ in range(rounds):
            for path in PATHS:
                stats, before, started = await probe.snapshot(), cpu.snapshot(), time.monotonic()
                await senders[path]()
                wall, after = time.monotonic() - started, cpu.snapshot()
                text = StatsProbe.delta(stats, await probe.snapshot())["text"]
                per_path[path].append({name: round((after[name] - before[name]) * 1e6 / items, 1) for name in after}
                                      | {"items_per_s": round(items / wall, 1),
                                         "text_batch_size": float(text["mean_batch_size"] or 0.0)})
                print(f"[router_cpu] round {round_} {path}: {per_path[path][-1]}", file=sys.stderr, flush=True)
    return {path: {"router_us_per_item": statistics.median(r["router"] for r in runs),
                   "text_us_per_item": statistics.median(r["text"] for r in runs),
                   "generator_us_per_item": statistics.median(r["generator"] for r in runs),
                   "items_per_s": statistics.median(r["items_per_s"] for r in runs),
                   "text_batch_size": statistics.median(r["text_batch_size"] for r in runs), "rounds": runs}
            for path, runs in per_path.items()}


async def run(items: int, in_flight: int, rounds: int, profile: str | None = None) -> dict[str, Any]:
    account = CpuAccount.start()
    inputs = BenchInputs.build(images=1)
    with tempfile.TemporaryDirectory(prefix="auditmesh-router-cpu-") as tmp, \
            running_mesh(auditmesh_mesh(Path(tmp), [REALTIME], profile), with_router=True) as mesh:
        cpu = ProcessCpu({"router": mesh.processes["router"].pid, "text": mesh.processes["text"].pid,
                          "generator": os.getpid()})
        async with modality_clients(mesh) as clients:
            paths = await measure(mesh.address("router"), cpu, StatsProbe(clients), inputs, items=items,
                                  in_flight=in_flight, rounds=rounds)
    batch = paths["batch"]["router_us_per_item"]
    report: dict[str, Any] = {"machine": machine(), "policy_profile": profile or "shipped", "items": items, "in_flight": in_flight, "rounds": rounds,
                              "batch_items_per_call": BATCH_ITEMS, "paths": paths,
                              "router_cpu_over_batch": {path: round(paths[path]["router_us_per_item"] / batch, 2)
                                                        for path in PATHS}}
    report["machine"]["foreign_cpu_share"] = account.foreign_cpu_share()
    return report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.router_cpu", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--items", type=int, default=3000, help="text items per path per round (default 3000)")
    parser.add_argument("--in-flight", type=int, default=64, help="items outstanding at once (default 64)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, each over every path (default 3)")
    parser.add_argument("--policy-profile", choices=("fast", "balanced", "accurate"),
                        help="set every policy to this profile (default: as shipped)")
    args = parser.parse_args(argv)
    report = asyncio.run(run(args.items, args.in_flight, args.rounds, args.policy_profile))
    report["command"] = " ".join(["python -m bench.router_cpu", *(argv if argv is not None else sys.argv[1:])])
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
