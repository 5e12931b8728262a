"""P99 impact of a policy swap: latency in the second around each activation vs steady state, as JSON.

Starts the text service and the router (text-only items need nothing else) with a temporary tenants
file, policy store and audit log; stores `--versions` policy versions, each with its own custom
blocklist of `--terms` terms (so every activation builds a new Aho-Corasick automaton); runs a
closed-loop load of `--concurrency` callers for `--duration` seconds; and activates the next version
through the PolicyAdmin API every `--swap-every` seconds.

"Around a swap" = requests that started within ±0.5 s of an activation call's midpoint; "steady" =
requests that started more than 1 s from every activation. Reported: P50/P99 of both, the ratio of
the P99s, failed requests, and the activation call's own latency.

    python -m bench.policy_swap [--duration 30] [--concurrency 8] [--swap-every 3] [--terms 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import tempfile
import time
from pathlib import Path
from typing import Sequence

import grpc
import yaml
from auditmesh.v1 import admin_pb2 as apb
from auditmesh.v1 import admin_pb2_grpc as apb_grpc
from auditmesh.v1 import moderation_pb2 as pb
from auditmesh.v1 import moderation_pb2_grpc as pb_grpc

from services.launcher import Mesh, free_base_port
from services.router.tenants import hash_key

ADMIN = [("x-admin-key", "demo-admin-key")]  # config/router.yaml's loopback demo key
KEY = "bench-swap-key"
POLICY = "swapbench"
TEXTS = ("see you at the pier tomorrow", "this product is great, thanks", "WINNER claim your prize now")


def nearest_rank(samples: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile (no interpolation) of unsorted samples; NaN when empty."""
    ordered = sorted(samples)
    if not ordered:
        return math.nan
    return ordered[max(1, math.ceil(fraction * len(ordered))) - 1]


def policy_text(version: int, terms: int) -> str:
    words = [f"banned{version}x{i}" for i in range(terms)]
    return yaml.safe_dump({"name": POLICY, "version": f"v{version}", "categories": {"hate": {"review": 0.5, "block": 0.9}},
                           "blocklist": {"custom": {"bench": {"severity": "high", "terms": words}}}})


def start_mesh(workdir: Path) -> Mesh:
    tenants = workdir / "tenants.yaml"
    tenants.write_text(yaml.safe_dump({"tenants": [{"id": "bench", "api_key_sha256": hash_key(KEY),
                                                    "policies": ["default"]}]}))
    base = free_base_port()
    mesh = Mesh(base, extra_env={"AUDITMESH_TENANTS_FILE": str(tenants), "AUDITMESH_METRICS_LISTEN": "off",
                                 "AUDITMESH_POLICY_STORE": str(workdir / "store.sqlite"),
                                 "AUDITMESH_AUDIT_LOG": str(workdir / "audit.sqlite")})
    mesh.start_service("text")
    mesh.wait_serving("text")
    mesh.start_service("router")
    mesh.wait_serving("router")
    return mesh




async def prepare(admin: apb_grpc.PolicyAdminStub, versions: int, terms: int) -> None:
    for version in range(versions):
        await admin.PutVersion(apb.PutVersionRequest(kind=apb.POLICY, name=POLICY, content=policy_text(version, terms),
                                                     activate=version == 0), metadata=ADMIN)
    tenants = await admin.GetVersion(apb.GetVersionRequest(kind=apb.TENANTS), metadata=ADMIN)
    data = yaml.safe_load(tenants.content)
    data["tenants"][0]["policies"] = [POLICY]
    data["version"] = "bench"
    await admin.PutVersion(apb.PutVersionRequest(kind=apb.TENANTS, content=yaml.safe_dump(data), activate=True), metadata=ADMIN)


async def caller(stub: pb_grpc.ModerationServiceStub, stop: asyncio.Event, samples: list[tuple[float, float]],
                 failures: list[str], worker: int) -> None:
    i = 0
    while not stop.is_set():
        i += 1
        item = pb.Item(id=f"w{worker}-{i}", parts=[pb.Part(text=TEXTS[i % len(TEXTS)])])
        started = time.monotonic()
        try:
            await stub.Moderate(pb.ModerateRequest(item=item), metadata=[("x-api-key", KEY)], timeout=5.0)
        except grpc.aio.AioRpcError as error:
            failures.append(error.code().name)
            continue
        samples.append((started, time.monotonic() - started))


async def run(address: str, args: argparse.Namespace) -> dict[str, object]:
    async with grpc.aio.insecure_channel(address) as channel:
        admin, stub = apb_grpc.PolicyAdminStub(channel), pb_grpc.ModerationServiceStub(channel)
        await prepare(admin, args.versions, args.terms)
        samples: list[tuple[float, float]] = []
        failures: list[str] = []
        stop = asyncio.Event()
        workers = [asyncio.create_task(caller(stub, stop, samples, failures, w)) for w in range(args.concurrency)]
        swaps: list[float] = []
        activation_ms: list[float] = []
        begin = time.monotonic()
        version = 0
        while time.monotonic() - begin < args.duration:
            await asyncio.sleep(args.swap_every)
            version = version % (args.versions - 1) + 1
            sent = time.monotonic()
            await admin.Activate(apb.ActivateRequest(kind=apb.POLICY, name=POLICY, version=f"v{version}"), metadata=ADMIN)
            done = time.monotonic()
            swaps.append((sent + done) / 2)
            activation_ms.append((done - sent) * 1000)
        await asyncio.sleep(1.0)
        stop.set()
        await asyncio.gather(*workers)
    return summarize(samples, swaps, failures, activation_ms, args)


def summarize(samples: list[tuple[float, float]], swaps: list[float], failures: list[str], activation_ms: list[float],
              args: argparse.Namespace) -> dict[str, object]:
    warm = min(swaps) - args.swap_every / 2 if swaps else 0.0  # skip the warm-up before the first swap window
    around = [lat for start, lat in samples if any(abs(start - s) <= 0.5 for s in swaps)]
    steady = [lat for start, lat in samples if start >= warm and all(abs(start - s) > 1.0 for s in swaps)]
    p99_around, p99_steady = nearest_rank(around, 0.99) * 1000, nearest_rank(steady, 0.99) * 1000
    return {
        "benchmark": "policy_swap", "swaps": len(swaps), "requests": len(samples), "failed_requests": len(failures),
        "concurrency": args.concurrency, "terms_per_version": args.terms, "swap_every_s": args.swap_every,
        "steady": {"n": len(steady), "p50_ms": round(nearest_rank(steady, 0.5) * 1000, 2), "p99_ms": round(p99_steady, 2)},
        "around_swap": {"n": len(around), "p50_ms": round(nearest_rank(around, 0.5) * 1000, 2), "p99_ms": round(p99_around, 2)},
        "p99_ratio": round(p99_around / p99_steady, 3) if p99_steady else None,
        "activate_call_ms": {"p50": round(nearest_rank(activation_ms, 0.5), 1), "max": round(max(activation_ms, default=0), 1)},
    }


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.policy_swap", description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=30.0, help="seconds of load (default 30)")
    parser.add_argument("--concurrency", type=int, default=8, help="closed-loop callers (default 8)")
    parser.add_argument("--swap-every", type=float, default=3.0, help="seconds between activations (default 3)")
    parser.add_argument("--versions", type=int, default=6, help="policy versions to rotate through (default 6)")
    parser.add_argument("--terms", type=int, default=2000, help="custom blocklist terms per version (default 2000)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="policy-swap-") as workdir:
        mesh = start_mesh(Path(workdir))
        try:
            result = asyncio.run(run(mesh.address("router"), args))
        finally:
            mesh.stop()
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
