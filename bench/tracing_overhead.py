"""What tracing costs in throughput: the same load against meshes side by side, tracing off and on.

Starts router + text-service pairs as processes (`services.launcher.Mesh`): one with tracing off (the
default), one with `OTEL_TRACES_EXPORTER=console` (spans serialised as JSON to /dev/null, so the
exporter's work is counted) and `parentbased_traceidratio` sampling at `--ratio` (default 1%), and a
second pair with tracing off as a control (`--no-control` leaves it out). All pairs are running the
whole time; closed-loop load (`--concurrency` clients, text items through `Moderate`) goes to one pair
at a time, in short rounds whose order alternates, so drift on a shared machine hits each alike. Text
items are the worst case for tracing: the request is cheap (about 1 ms of server CPU), so per-call
instrumentation weighs the most.

Prints JSON: for tracing on and for the control, the median over rounds of the throughput ratio to the
"off" round next to it, with a 95% bootstrap interval (resampling rounds), and the CPU time the router
and text processes spent per request (from /proc). The control's ratio is this run's noise floor: two
identical meshes differ by that much here. `overhead_percent` is 100 × (1 − the median ratio on/off).

Run: `python -m bench.tracing_overhead [--rounds 20 --seconds 2 --concurrency 16 --ratio 0.01]`
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
def text_pair(tenants_file: Path, ratio: float | None, name: str) -> Iterator[Mesh]:
    """Router + text service with tracing as given; vision and OCR are not started (text items only).
    The router's policy store and audit log are its own (in a folder `name` next to `tenants_file`)."""
    base = free_base_port(4)
    dead = f"127.0.0.1:{free_base_port(1)}"
    state = tenants_file.parent / name
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
    """Warm each mesh up, then take timed rounds on each in turn (the order reversed every other round)."""
    for mesh in meshes.values():
        await load(mesh.address("router"), min(2.0, seconds), concurrency)
    results: dict[str, list[Round]] = {name: [] for name in meshes}
    for index in range(rounds):
        order = list(meshes) if index % 2 == 0 else list(reversed(meshes))  # no side always goes first
        for name in order:
            cpu_before = cpu_seconds(meshes[name])
            results[name].append(await load(meshes[name].address("router"), seconds, concurrency))
            cpu_after = cpu_seconds(meshes[name])
            results[name][-1].cpu_s = {service: cpu_after[service] - cpu_before[service] for service in cpu_after}
            print(f"round {index + 1} {name}: {results[name][-1].throughput:.0f} req/s", file=sys.stderr)
    return results


def paired_ratios(base: Sequence[Round], other: Sequence[Round]) -> list[float]:
    """Each round's throughput over the base's throughput in the same round."""
    return [b.throughput / a.throughput for a, b in zip(base, other) if a.throughput]


@dataclass(frozen=True)
class RatioEstimate:
    """The median of per-round ratios, its 95% bootstrap interval, and the ratios' range."""

    median: float
    ci95: tuple[float, float]
    spread: tuple[float, float]

    def as_json(self) -> dict[str, object]:
        return {"median": round(self.median, 4), "ci95": [round(bound, 4) for bound in self.ci95],
                "range": [round(bound, 3) for bound in self.spread]}


def median_with_interval(ratios: Sequence[float], resamples: int = 2000, seed: int = 7) -> RatioEstimate:
    """The median of `ratios` and its 95% bootstrap interval (rounds resampled with replacement)."""
    if not ratios:
        return RatioEstimate(0.0, (0.0, 0.0), (0.0, 0.0))
    values = np.asarray(ratios)
    draws = np.random.default_rng(seed).choice(values, size=(resamples, len(values)), replace=True)
    low, high = np.percentile(np.median(draws, axis=1), [2.5, 97.5])
    return RatioEstimate(float(np.median(values)), (float(low), float(high)), (float(values.min()), float(values.max())))


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.tracing_overhead", description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=20, help="timed rounds per mesh (default 20)")
    parser.add_argument("--seconds", type=float, default=2.0, help="length of one round (default 2)")
    parser.add_argument("--concurrency", type=int, default=16, help="closed-loop clients (default 16)")
    parser.add_argument("--ratio", type=float, default=0.01, help="sampling ratio with tracing on (default 0.01)")
    parser.add_argument("--no-control", dest="control", action="store_false",
                        help="leave out the second tracing-off mesh that measures this run's noise")
    return parser.parse_args(argv)


def report(results: dict[str, list[Round]], args: argparse.Namespace) -> dict[str, object]:
    """The JSON document (see the module docstring)."""
    summaries = {name: summary(rounds) for name, rounds in results.items()}
    off_cpu = float(str(summaries["off"]["server_cpu_us_per_request"]))
    on = median_with_interval(paired_ratios(results["off"], results["on"]))
    on_cpu = float(str(summaries["on"]["server_cpu_us_per_request"]))
    document: dict[str, object] = {
        "workload": "text items through the router (router + text service processes)",
        "exporter": "console (to /dev/null)", "sampling_ratio": args.ratio, "rounds": args.rounds,
        "seconds_per_round": args.seconds, "concurrency": args.concurrency,
        "tracing_off": summaries["off"], "tracing_on": summaries["on"],
        "round_ratio_on_over_off": on.as_json(),
        "overhead_percent": round((1 - on.median) * 100, 2),
        "overhead_percent_ci95": [round((1 - on.ci95[1]) * 100, 2), round((1 - on.ci95[0]) * 100, 2)],
        "cpu_ratio_on_over_off": round(on_cpu / off_cpu, 4) if off_cpu else 0.0,
    }
    if "control" in results:
        control_cpu = float(str(summaries["control"]["server_cpu_us_per_request"]))
        document["tracing_off_control"] = summaries["control"]
        document["round_ratio_control_over_off"] = median_with_interval(paired_ratios(results["off"], results["control"])).as_json()
        document["cpu_ratio_control_over_off"] = round(control_cpu / off_cpu, 4) if off_cpu else 0.0
    return document


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory() as workdir, contextlib.ExitStack() as stack:
        tenants_file = Path(workdir) / "tenants.yaml"
        tenants_file.write_text(f"tenants:\n  - id: bench\n    api_key_sha256: {hash_key(BENCH_KEY)}\n"
                                f"    policies: [default]\n", encoding="utf-8")
        sides: dict[str, float | None] = {"off": None, "on": args.ratio}
        if args.control:
            sides["control"] = None
        meshes = {name: stack.enter_context(text_pair(tenants_file, ratio, name)) for name, ratio in sides.items()}
        results = asyncio.run(compare(meshes, args.rounds, args.seconds, args.concurrency))
    print(json.dumps(report(results, args), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
