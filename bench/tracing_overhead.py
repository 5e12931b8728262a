"""What tracing costs in throughput: the same load against meshes side by side, tracing off and on.

A set is three router + text-service pairs started as processes (`services.launcher.Mesh`): one with
tracing off (the default), one with `OTEL_TRACES_EXPORTER=console` (spans serialised as JSON to
/dev/null, so the exporter's work is counted) and `parentbased_traceidratio` sampling at `--ratio`
(default 1%), and a second one with tracing off, the control (`--no-control` leaves it out). Closed-loop
load (`--concurrency` clients, text items through `Moderate`) goes to one pair at a time, in short
rounds whose order alternates, so drift on a shared machine hits each alike. Text items are the worst
case for tracing: the request is cheap (about 1 ms of server CPU), so per-call instrumentation weighs
the most.

Why sets: two identical processes started one after the other differ here by up to ±5% in throughput
for as long as they run (memory placement; the control shows it), more than the effect measured; more
rounds do not shrink that, fresh processes do. So `--sets` sets are started one after another, each
set's ratio is the median of its paired rounds (each on round over the off round next to it), and the
result is the mean over sets with a 95% t-interval.

Why pinned (the default; `--no-pin` to share): the services' processes run on the last CPU and the
load generator on the others, so the services are the bottleneck and the generator's own CPU use,
which tracing does not change, neither dilutes the ratio nor competes with the services unevenly.

Prints JSON: per set and overall, the throughput ratio of tracing on over the baseline (each round,
the mean of the two tracing-off meshes: two instances halve one instance's noise), the ratio
control/off (this run's noise floor), and the CPU time the router and text processes spent per
request (from /proc). `overhead_percent` is 100 × (1 − the mean ratio on/baseline), `control_percent`
100 × (1 − the mean ratio control/off).

Run: `python -m bench.tracing_overhead [--sets 5 --rounds 8 --seconds 2 --concurrency 16 --ratio 0.01 --no-pin]`
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


#: Two-sided 95% quantiles of Student's t by degrees of freedom (1.96 beyond the table).
_T_975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
          12: 2.179, 15: 2.131, 20: 2.086, 30: 2.042}


def mean_with_interval(values: Sequence[float]) -> tuple[float, tuple[float, float]]:
    """The mean of `values` and its 95% t-interval (the mean itself twice for fewer than two values)."""
    if not values:
        return 0.0, (0.0, 0.0)
    mean = float(np.mean(values))
    if len(values) < 2:
        return mean, (mean, mean)
    dof = len(values) - 1
    quantile = next((_T_975[k] for k in sorted(_T_975) if k >= dof), 1.96)
    half = quantile * float(np.std(values, ddof=1)) / len(values) ** 0.5
    return mean, (mean - half, mean + half)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.tracing_overhead", description=__doc__.split("\n")[0])
    parser.add_argument("--sets", type=int, default=5, help="sets of freshly started meshes (default 5)")
    parser.add_argument("--rounds", type=int, default=8, help="timed rounds per mesh in each set (default 8)")
    parser.add_argument("--seconds", type=float, default=2.0, help="length of one round (default 2)")
    parser.add_argument("--concurrency", type=int, default=16, help="closed-loop clients (default 16)")
    parser.add_argument("--ratio", type=float, default=0.01, help="sampling ratio with tracing on (default 0.01)")
    parser.add_argument("--no-control", dest="control", action="store_false",
                        help="leave out the second tracing-off mesh that measures this run's noise")
    parser.add_argument("--no-pin", dest="pin", action="store_false",
                        help="let the services and the load generator share every CPU (default: the services on "
                             "the last CPU, the load generator on the others, so the services are the bottleneck)")
    return parser.parse_args(argv)


def baseline(results: dict[str, list[Round]]) -> list[float]:
    """The tracing-off throughput of each round: the mean of "off" and "control" when there is a
    control (two instances halve the noise of one), else "off"."""
    if "control" not in results:
        return [r.throughput for r in results["off"]]
    return [(off.throughput + control.throughput) / 2 for off, control in zip(results["off"], results["control"])]


def set_report(results: dict[str, list[Round]]) -> dict[str, object]:
    """One set: each side's summary, and the median round ratios on/baseline (see `baseline`) and
    control/off (the noise floor)."""
    document: dict[str, object] = {name: summary(rounds) for name, rounds in results.items()}
    on = [r.throughput / base for base, r in zip(baseline(results), results["on"]) if base]
    document["ratio_on_over_baseline"] = round(float(np.median(on)), 4)
    if "control" in results:
        document["ratio_control_over_off"] = round(float(np.median(paired_ratios(results["off"], results["control"]))), 4)
    return document


def report(sets: Sequence[dict[str, list[Round]]], args: argparse.Namespace) -> dict[str, object]:
    """The JSON document (see the module docstring)."""
    per_set = [set_report(results) for results in sets]
    pooled = {name: summary([r for results in sets for r in results[name]]) for name in sets[0]}
    document: dict[str, object] = {
        "workload": "text items through the router (router + text service processes)",
        "exporter": "console (to /dev/null)", "sampling_ratio": args.ratio, "sets": args.sets, "rounds": args.rounds,
        "seconds_per_round": args.seconds, "concurrency": args.concurrency,
        "pinned": bool(getattr(args, "pinned", False)),
        "tracing_off": pooled["off"], "tracing_on": pooled["on"]}
    if "control" in pooled:
        document["tracing_off_control"] = pooled["control"]
    off_cpu = float(str(pooled["off"]["server_cpu_us_per_request"]))
    base_cpu = (off_cpu + float(str(pooled["control"]["server_cpu_us_per_request"]))) / 2 if "control" in pooled else off_cpu
    for name, ratio_key, key, cpu_base in (("on", "ratio_on_over_baseline", "overhead_percent", base_cpu),
                                           ("control", "ratio_control_over_off", "control_percent", off_cpu)):
        if name not in pooled:
            continue
        ratios = [float(str(one[ratio_key])) for one in per_set]
        mean, (low, high) = mean_with_interval(ratios)
        document[ratio_key] = {"mean": round(mean, 4), "ci95": [round(low, 4), round(high, 4)], "per_set": ratios}
        document[key] = round((1 - mean) * 100, 2)
        document[f"{key}_ci95"] = [round((1 - high) * 100, 2), round((1 - low) * 100, 2)]
        cpu = float(str(pooled[name]["server_cpu_us_per_request"]))
        document[f"cpu_ratio_{ratio_key.removeprefix('ratio_')}"] = round(cpu / cpu_base, 4) if cpu_base else 0.0
    document["per_set"] = per_set
    return document


def pin(pid: int, cpus: set[int]) -> None:
    """Every thread of process `pid` (threads it starts later inherit it) onto `cpus` (Linux)."""
    for task in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(ProcessLookupError):  # a thread that just ended
            os.sched_setaffinity(int(task), cpus)


def server_cpus() -> tuple[set[int], set[int]] | None:
    """(the services' CPUs, the load generator's CPUs) for `--pin`: the last CPU for the services, the
    others for the generator; None with fewer than two CPUs."""
    cpus = sorted(os.sched_getaffinity(0))
    return ({cpus[-1]}, set(cpus[:-1])) if len(cpus) >= 2 else None


def run_set(workdir: Path, index: int, args: argparse.Namespace) -> dict[str, list[Round]]:
    """Start one set of meshes, measure, stop them."""
    tenants_file = workdir / "tenants.yaml"
    sides: dict[str, float | None] = {"off": None, "on": args.ratio}
    if args.control:
        sides["control"] = None
    with contextlib.ExitStack() as stack:
        meshes = {name: stack.enter_context(text_pair(tenants_file, ratio, f"{name}-{index}")) for name, ratio in sides.items()}
        split = server_cpus() if args.pinned else None
        if split is not None:
            for mesh in meshes.values():
                for process in mesh.processes.values():
                    pin(process.pid, split[0])
            pin(os.getpid(), split[1])
        print(f"set {index + 1} of {args.sets}: meshes up", file=sys.stderr)
        return asyncio.run(compare(meshes, args.rounds, args.seconds, args.concurrency))


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    args.pinned = args.pin and server_cpus() is not None
    with tempfile.TemporaryDirectory() as workdir:
        (Path(workdir) / "tenants.yaml").write_text(f"tenants:\n  - id: bench\n    api_key_sha256: {hash_key(BENCH_KEY)}\n"
                                                    f"    policies: [default]\n", encoding="utf-8")
        sets = [run_set(Path(workdir), index, args) for index in range(args.sets)]
    print(json.dumps(report(sets, args), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
