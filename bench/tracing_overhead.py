"""What tracing costs in throughput: the same load against two meshes side by side, tracing off and on.

Starts two router + text-service pairs as processes (`services.launcher.Mesh`): one with tracing off
(the default), one with `OTEL_TRACES_EXPORTER=console` (spans serialised as JSON to /dev/null, so the
exporter's work is counted) and `parentbased_traceidratio` sampling at `--ratio` (default 1%). Both
pairs are running the whole time; closed-loop load (`--concurrency` clients, text items through
`Moderate`) goes to one pair at a time, alternating off/on for `--rounds` short rounds so drift on a
shared machine hits both alike. Text items are the worst case for tracing: the request is cheap
(≈ 3 ms), so per-call instrumentation weighs the most. Prints JSON: the on/off ratio of the total
throughputs, the median of the per-round ratios (each on round over the off round next to it), and
the CPU time the router and text processes spent per request (from /proc, so other load on a shared
machine barely moves it): `cpu_ratio_on_over_off` is the cost of tracing with the noise taken out.

Run: `python -m bench.tracing_overhead [--rounds 12 --seconds 3 --concurrency 16 --ratio 0.01]`
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Sequence

import grpc
import numpy as np
from auditmesh.v1 import moderation_pb2 as pb
from auditmesh.v1 import moderation_pb2_grpc as pb_grpc

from services.launcher import Mesh, free_base_port
from services.router.tenants import hash_key

BENCH_KEY = "bench-tracing-key"
TEXTS = ("Thanks for the lovely dinner last night, see you on Friday!", "you are an idiot", "新年快乐，万事如意",
         "WINNER!! Claim your free prize now")




def tracing_env(ratio: float | None) -> dict[str, str]:
    """OTEL_* variables: tracing off (None) or on with the console exporter at `ratio`."""
    if ratio is None:
        return {"OTEL_TRACES_EXPORTER": "none"}
    return {"OTEL_TRACES_EXPORTER": "console", "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
            "OTEL_TRACES_SAMPLER_ARG": str(ratio), "OTEL_BSP_SCHEDULE_DELAY": "1000"}


@contextlib.contextmanager
def text_pair(tenants_file: Path, ratio: float | None) -> Iterator[Mesh]:
    """Router + text service with tracing as given; vision and OCR are not started (text items only).
    The router's policy store and audit log are its own (next to `tenants_file`)."""
    base = free_base_port(4)
    dead = f"127.0.0.1:{free_base_port(1)}"
    state = tenants_file.parent / ("on" if ratio is not None else "off")
    state.mkdir(exist_ok=True)
    env = {"AUDITMESH_TENANTS_FILE": str(tenants_file), "AUDITMESH_VISION_URL": dead, "AUDITMESH_OCR_URL": dead,
           "AUDITMESH_POLICY_STORE": str(state / "policy_store.sqlite"), "AUDITMESH_AUDIT_LOG": str(state / "audit.sqlite"),
           **tracing_env(ratio)}
    mesh = Mesh(base_port=base, extra_env=env, output=subprocess.DEVNULL)
    try:
        for service in ("text", "router"):
            mesh.start_service(service)
            mesh.wait_serving(service)
        yield mesh
    finally:
        mesh.stop()


def cpu_seconds(mesh: Mesh) -> dict[str, float]:
    """User + system CPU time used so far by each of the mesh's processes (Linux /proc)."""
    used = {}
    for service, process in mesh.processes.items():
        fields = Path(f"/proc/{process.pid}/stat").read_text().rpartition(")")[2].split()
        used[service] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime
    return used


@dataclass
class Round:
    """One timed burst of closed-loop load."""

    requests: int = 0
    errors: int = 0
    seconds: float = 0.0
    cpu_s: dict[str, float] = field(default_factory=dict)
    latencies_ms: list[float] = field(default_factory=list)

    @property
    def throughput(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0


async def load(address: str, seconds: float, concurrency: int) -> Round:
    """`concurrency` clients each sending one text item at a time for `seconds`."""
    result = Round()
    request_ids = iter(range(1 << 62))
    async with grpc.aio.insecure_channel(address) as channel:
        stub = pb_grpc.ModerationServiceStub(channel)
        stop_at = time.perf_counter() + seconds

        async def client() -> None:
            while time.perf_counter() < stop_at:
                number = next(request_ids)
                request = pb.ModerateRequest(request_id=f"b{number}", item=pb.Item(id="i"))
                request.item.parts.add(text=TEXTS[number % len(TEXTS)])
                began = time.perf_counter()
                try:
                    await stub.Moderate(request, metadata=[("x-api-key", BENCH_KEY)], timeout=10)
                except grpc.aio.AioRpcError:
                    result.errors += 1
                    continue
                result.latencies_ms.append((time.perf_counter() - began) * 1000)
                result.requests += 1

        began = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(concurrency)))
        result.seconds = time.perf_counter() - began
    return result


def summary(rounds: Sequence[Round]) -> dict[str, object]:
    latencies = np.array([ms for r in rounds for ms in r.latencies_ms] or [0.0])
    total_s = sum(r.seconds for r in rounds)
    requests = sum(r.requests for r in rounds)
    return {"throughput_rps": round(requests / total_s, 1) if total_s else 0.0,
            "server_cpu_us_per_request": round(sum(sum(r.cpu_s.values()) for r in rounds) / requests * 1e6, 1)
            if requests else 0.0,
            "cpu_us_per_request_by_service": {service: round(sum(r.cpu_s.get(service, 0.0) for r in rounds) / requests * 1e6, 1)
                                              for service in rounds[0].cpu_s} if requests else {},
            "rounds_rps": [round(r.throughput, 1) for r in rounds], "errors": sum(r.errors for r in rounds),
            "p50_ms": round(float(np.percentile(latencies, 50)), 2), "p99_ms": round(float(np.percentile(latencies, 99)), 2)}


async def compare(meshes: dict[str, Mesh], rounds: int, seconds: float, concurrency: int) -> dict[str, list[Round]]:
    """Warm each mesh up, then alternate timed rounds between them."""
    for mesh in meshes.values():
        await load(mesh.address("router"), min(2.0, seconds), concurrency)
    results: dict[str, list[Round]] = {name: [] for name in meshes}
    for index in range(rounds):
        order = list(meshes) if index % 2 == 0 else list(reversed(meshes))  # neither side always goes first
        for name in order:
            cpu_before = cpu_seconds(meshes[name])
            results[name].append(await load(meshes[name].address("router"), seconds, concurrency))
            cpu_after = cpu_seconds(meshes[name])
            results[name][-1].cpu_s = {service: cpu_after[service] - cpu_before[service] for service in cpu_after}
            print(f"round {index + 1} {name}: {results[name][-1].throughput:.0f} req/s", file=sys.stderr)
    return results


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.tracing_overhead", description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=12, help="timed rounds per side (default 12)")
    parser.add_argument("--seconds", type=float, default=3.0, help="length of one round (default 3)")
    parser.add_argument("--concurrency", type=int, default=16, help="closed-loop clients (default 16)")
    parser.add_argument("--ratio", type=float, default=0.01, help="sampling ratio with tracing on (default 0.01)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory() as workdir:
        tenants_file = Path(workdir) / "tenants.yaml"
        tenants_file.write_text(f"tenants:\n  - id: bench\n    api_key_sha256: {hash_key(BENCH_KEY)}\n"
                                f"    policies: [default]\n", encoding="utf-8")
        with text_pair(tenants_file, None) as off, text_pair(tenants_file, args.ratio) as on:
            results = asyncio.run(compare({"off": off, "on": on}, args.rounds, args.seconds, args.concurrency))
    off_summary, on_summary = summary(results["off"]), summary(results["on"])
    off_rps, on_rps = float(str(off_summary["throughput_rps"])), float(str(on_summary["throughput_rps"]))
    ratio = on_rps / off_rps if off_rps else 0.0
    paired = [on.throughput / off.throughput for off, on in zip(results["off"], results["on"]) if off.throughput]
    median = float(np.median(paired)) if paired else 0.0
    off_cpu, on_cpu = float(str(off_summary["server_cpu_us_per_request"])), float(str(on_summary["server_cpu_us_per_request"]))
    cpu_ratio = on_cpu / off_cpu if off_cpu else 0.0
    print(json.dumps({"workload": "text items through the router (router + text service processes)",
                      "exporter": "console (to /dev/null)", "sampling_ratio": args.ratio, "rounds": args.rounds,
                      "seconds_per_round": args.seconds, "concurrency": args.concurrency,
                      "tracing_off": off_summary, "tracing_on": on_summary,
                      "throughput_ratio_on_over_off": round(ratio, 4),
                      "median_round_ratio_on_over_off": round(median, 4),
                      "round_ratio_range": [round(min(paired, default=0.0), 3), round(max(paired, default=0.0), 3)],
                      "overhead_percent": round((1 - median) * 100, 2),
                      "cpu_ratio_on_over_off": round(cpu_ratio, 4),
                      "cpu_overhead_percent": round((cpu_ratio - 1) * 100, 2)}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
