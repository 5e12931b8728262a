"""Throughput of 1, 2 and 4 router replicas in front of the same text service (issue 41), printed as JSON.

    python -m bench.router_replicas                    # 1, 2, 4 replicas, 20 s each
    python -m bench.router_replicas --replicas 1 2 --seconds 10 --concurrency 64

One text service and up to four replicas of the interactive router lane (`Mesh(router_replicas=4)`,
isolated state), all on this machine. Each step starts the step's replicas, warms them, then runs a
closed loop for `--seconds`: `--concurrency` callers of the client library (`auditmesh.client`,
batching on, every replica's address: calls go round robin) each sending one short text after another
(the naturalistic test split, zh and en). Reported per step: answered items per second, latency
(P50/P95/P99 from the caller's call to its verdict), errors by code, and per process (the replicas, the
text service, the generator) the cores it kept busy and its CPU ms per answered item.

On one 2-core machine the replicas, the text service and the load generator share the same cores:
more replicas cannot add CPU here, so the numbers show what replication costs or saves on one host,
not how a fleet scales. Compare only within one run on a quiet machine (`foreign_cpu_share` near 0).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

from auditmesh.client import AsyncClient, ModerationError
from bench.cpu import ProcessCpu
from bench.machine import CpuAccount, code_version
from bench.natural_quality import load_split
from bench.stats import summarize_ms
from services.launcher import REPLICA_PORT_OFFSET, Mesh, free_base_port

__all__ = ["main"]

KEY = "demo-acme-key"  # config/tenants.yaml: acme is a realtime tenant (the interactive lane)


def processes(mesh: Mesh, services: Sequence[str]) -> ProcessCpu:
    """CPU accounting for `services` and this process (the load generator)."""
    return ProcessCpu({**{s: mesh.processes[s].pid for s in services}, "generator": os.getpid()})


async def closed_loop(addresses: Sequence[str], texts: Sequence[str], concurrency: int, seconds: float) -> dict[str, Any]:
    """`concurrency` callers, each sending its next text as soon as the last was answered, for `seconds`."""
    latencies: list[float] = []
    codes: Counter[str] = Counter()
    async with AsyncClient(list(addresses), api_key=KEY, timeout_s=5.0) as client:
        stop_at = time.monotonic() + seconds

        async def caller(offset: int) -> None:
            index = offset
            while time.monotonic() < stop_at:
                started = time.monotonic()
                try:
                    await client.moderate(text=texts[index % len(texts)])
                    latencies.append(time.monotonic() - started)
                    codes["OK"] += 1
                except ModerationError as error:
                    codes[error.code.name] += 1
                index += concurrency

        started = time.monotonic()
        await asyncio.gather(*(caller(i) for i in range(concurrency)))
        elapsed = time.monotonic() - started
    return {"seconds": round(elapsed, 2), "items_per_s": round(codes["OK"] / elapsed, 1),
            "latency": summarize_ms(latencies), "codes": dict(codes)}


async def run(args: argparse.Namespace) -> dict[str, Any]:
    texts = [str(r["text"]) for r in load_split("zh", "test") + load_split("en", "test")]
    most = max(args.replicas)
    mesh = Mesh(base_port=free_base_port(REPLICA_PORT_OFFSET + 2 * most), router_replicas=most)
    routers = mesh.replicas(mesh.routers[0])
    account = CpuAccount.start()
    steps = []
    try:
        mesh.start_services(["text"], 180.0)
        for count in args.replicas:
            serving = routers[:count]
            mesh.start_services(serving, 180.0)
            addresses = [mesh.address(r) for r in serving]
            await closed_loop(addresses, texts, args.concurrency, 3.0)  # warm-up, not reported
            cpu = processes(mesh, ["text", *serving])
            before = cpu.snapshot()
            step = await closed_loop(addresses, texts, args.concurrency, args.seconds)
            step["cpu"] = ProcessCpu.usage(before, cpu.snapshot(), wall_s=step["seconds"],
                                           requests=step["codes"].get("OK", 0))
            steps.append({"replicas": count, **step})
            mesh.stop_services(serving)
    finally:
        mesh.stop()
    base = steps[0]["items_per_s"] if steps else 0
    return {"bench": "router_replicas", **code_version(), "concurrency": args.concurrency, "seconds": args.seconds,
            "steps": steps,
            "throughput_ratio_to_first": {str(s["replicas"]): round(s["items_per_s"] / base, 2) if base else None
                                          for s in steps},
            "foreign_cpu_share": account.foreign_cpu_share()}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.router_replicas", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--replicas", type=int, nargs="+", default=[1, 2, 4], help="steps (default 1 2 4)")
    parser.add_argument("--seconds", type=float, default=20.0, help="seconds per step (default 20)")
    parser.add_argument("--concurrency", type=int, default=64, help="callers in flight (default 64)")
    args = parser.parse_args(argv)
    if min(args.replicas) < 1:
        parser.error("--replicas: each step needs at least 1")
    print(json.dumps(asyncio.run(run(args)), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
