"""The verdict cache benchmark: text knee and P99 with and without the cache, at several duplicate
ratios of a Zipf-distributed workload, in one run on the real services. Prints JSON.

    python -m bench.verdict_cache [--ratios 0 0.3 0.6] [--slo-ms 50] [--step-s 4] [--quick]

One set of modality services (shipped configs) and two routers in front of them (`bench/side_router.py`):
`nocache` (the shipped router config) and `cache` (`verdict_cache.enabled: true`). For each duplicate
ratio, both routers' knees (highest offered rate, Poisson arrivals, one `Moderate` per item, whose
median P99 over the repeats meets the SLO with >= 99 % OK) are measured on one rate ladder, the two
routers interleaved step by step (`bench.paired`), then the ratio cache/nocache of the knees. Between
routers only the cache setting differs.

The workload (`zipf_workload`): an item either repeats content seen earlier in the same step (with
probability `duplicate_ratio`; which one is Zipf-distributed over first-appearance rank, exponent
1.1: a few lines repeat a lot, like "gg" and copy-paste spam) or is new. Every step uses its own texts
(a step tag in each), so a step starts with a cold cache and the 0 % ratio measures the cache's pure
overhead (key, lookup, a store per item).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

import grpc
from auditmesh.v1 import moderation_pb2 as pb
from auditmesh.v1 import moderation_pb2_grpc as pb_grpc

from bench.loadgen import Arrival, poisson_arrivals, run_open_loop
from bench.machine import machine
from bench.meshes import running_mesh
from bench.paired import LadderPlan, add_ladder_arguments, paired_knees, parse_ladder_args, step_report
from bench.payloads import TEXTS
from bench.router_target import CHANNEL_OPTIONS
from bench.side_router import side_router
from bench.stats import ratio
from bench.tenants import BenchTenant, tenants_yaml
from services.launcher import MODALITIES, Mesh, free_base_port

TENANT = BenchTenant("chat", "realtime")
ZIPF_EXPONENT = 1.1


def zipf_workload(count: int, duplicate_ratio: float, *, tag: str, seed: int = 0,
                  exponent: float = ZIPF_EXPONENT) -> list[str]:
    """`count` texts of which about `duplicate_ratio` repeat an earlier one (Zipf over first-appearance
    rank) and the rest are new (a chat line plus a unique `tag`-ed suffix). Deterministic for a seed.

    Example::

        >>> texts = zipf_workload(1000, 0.6, tag="s1", seed=1)
        >>> round(1 - len(set(texts)) / len(texts), 2)  # the first item is always new
        0.58
    """
    if not 0.0 <= duplicate_ratio < 1.0:
        raise ValueError(f"duplicate_ratio must be in [0, 1), got {duplicate_ratio}")
    rng = random.Random(seed)
    seen: list[str] = []
    weights: list[float] = []
    texts = []
    for i in range(count):
        if seen and rng.random() < duplicate_ratio:
            texts.append(rng.choices(seen, cum_weights=weights)[0])
            continue
        text = f"{TEXTS[i % len(TEXTS)]} #{tag}-{i}"
        seen.append(text)
        weights.append((weights[-1] if weights else 0.0) + 1.0 / len(seen) ** exponent)
        texts.append(text)
    return texts


class TextSender:
    """`bench.loadgen.Sender`: arrival i sends `texts[i]` as one Moderate call; counts cached answers."""

    def __init__(self, channel: grpc.aio.Channel, texts: Sequence[str], deadline_s: float) -> None:
        self._stub = pb_grpc.ModerationServiceStub(channel)
        self._requests = [pb.ModerateRequest(request_id=f"r{i}", item=pb.Item(id=f"i{i}", parts=[pb.Part(text=t)]))
                          for i, t in enumerate(texts)]
        self._metadata = (("x-api-key", TENANT.key),)
        self._deadline_s = deadline_s
        self.cached = 0
        self.degraded = 0

    async def __call__(self, arrival: Arrival) -> str:
        try:
            response = await self._stub.Moderate(self._requests[arrival.index], metadata=self._metadata,
                                                 timeout=self._deadline_s)
        except grpc.aio.AioRpcError as error:
            return str(error.code().name)
        self.cached += response.cached
        self.degraded += response.degraded
        return "OK"


async def run_step(address: str, rate_rps: float, duration_s: float, duplicate_ratio: float, slo_ms: float,
                   tag: str) -> dict[str, Any]:
    arrivals = poisson_arrivals(rate_rps, duration_s, kinds={"text": 1.0}, tenants={TENANT.id: 1.0}, seed=len(tag))
    arrivals = [Arrival(a.at_s, a.kind, a.tenant, i) for i, a in enumerate(arrivals)]
    texts = zipf_workload(len(arrivals), duplicate_ratio, tag=tag, seed=len(arrivals))
    async with grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS) as channel:
        sender = TextSender(channel, texts, deadline_s=max(1.0, 4 * slo_ms / 1000))
        started = time.perf_counter()
        outcomes = await run_open_loop(sender, arrivals)
        elapsed = time.perf_counter() - started
    return {**step_report(rate_rps, outcomes, elapsed), "cached": sender.cached, "degraded": sender.degraded,
            "duplicates": len(texts) - len(set(texts))}


def modality_services(tenants_file: Path) -> contextlib.AbstractContextManager[Mesh]:
    """Text, vision and OCR (shipped configs) started once for both routers."""
    mesh = Mesh(free_base_port(), extra_env={"AUDITMESH_TENANTS_FILE": str(tenants_file)})
    return running_mesh(mesh, with_router=False)


async def warm(address: str) -> None:
    """A few calls: connections, and the router learning the model versions (the cache needs them)."""
    for i in range(3):
        await run_step(address, 20.0, 0.5, 0.0, 1e6, f"warm{i}")


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="auditmesh-bench-cache-") as tmp:
        workdir = Path(tmp)
        tenants_file = workdir / "tenants.yaml"
        tenants_file.write_text(tenants_yaml([TENANT]), encoding="utf-8")
        with modality_services(tenants_file) as services:
            upstreams = {m: services.address(m) for m in MODALITIES}
            with side_router(workdir / "nocache", upstreams, tenants_file, {}, with_metrics=False) as plain, \
                    side_router(workdir / "cache", upstreams, tenants_file, {"verdict_cache": {"enabled": True}},
                                with_metrics=False) as cached:
                routers = {"nocache": plain.address("router"), "cache": cached.address("router")}
                for address in routers.values():
                    await warm(address)
                results: dict[str, Any] = {}
                plan = LadderPlan.from_args(args)
                for duplicate_ratio in args.ratios:
                    async def step(target: str, rate: float, repeat: int, ratio_: float = duplicate_ratio) -> dict[str, Any]:
                        return await run_step(routers[target], rate, args.step_s, ratio_, args.slo_ms,
                                              f"{target}{ratio_}-{rate}-{repeat}")
                    per_router = await paired_knees(list(routers), step, plan, f"{duplicate_ratio:.0%} ")
                    results[f"{duplicate_ratio:.0%}"] = {
                        **per_router, "knee_ratio_cache_over_nocache": ratio(per_router["cache"]["knee_rps"],
                                                                             per_router["nocache"]["knee_rps"])}
    return {"benchmark": "verdict_cache", "machine": machine(), "slo_p99_ms": args.slo_ms, "step_s": args.step_s,
            "repeats": args.repeats,
            "zipf_exponent": ZIPF_EXPONENT, "workload": "Poisson arrivals, one Moderate per text item, tenant chat "
            "(realtime), policy default", "ratios": results}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.verdict_cache", description=__doc__.split("\n\n")[0])
    parser.add_argument("--ratios", type=float, nargs="+", default=[0.0, 0.3, 0.6], help="duplicate ratios")
    add_ladder_arguments(parser, max_steps=10, quick_help="smoke run: one ratio, tiny steps, no meaningful numbers")
    args = parse_ladder_args(parser, argv)
    if args.quick:
        args.ratios = [0.5]
    return args


def main(argv: Sequence[str] | None = None) -> int:
    print(json.dumps(asyncio.run(bench(parse_args(argv))), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
