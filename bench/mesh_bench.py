"""The mesh benchmark: knee, baselines, isolation and low load in one run, on the real mesh. Prints JSON.

    python -m bench.mesh_bench [--quick] [--scenario direct|unbatched|auditmesh|batched|client|stream|isolation|lowload ...]
                               [--mix text|image|mixed ...] [--slo-text-ms 50] [--slo-image-ms 1000]
                               [--profile fast|balanced|accurate ...] [--policy-profile fast|balanced|accurate]

`--profile` (repeatable) runs the mesh scenarios once per accuracy profile, every shipped policy set
to it (bench/meshes.py `profile_policies_dir`), and adds `profiles`: each profile's text knee and
P99 at the knee, docs/quality.md's Pareto columns next to bench/quality.py's F1 and hard-negative FPR.

In order, each on a quiet machine (one thing at a time):
  1. `direct`: the models in this process, best batch size within the SLO (bench/direct.py);
  2. `unbatched`: text, vision and OCR services with batching off, called one item per RPC
     (bench/unbatched_target.py), knee per mix;
  3. the auditmesh mesh (router + services, shipped configs, bench tenants): `lowload` (1 item/s),
     `auditmesh` (knee per mix through the router, one item per Moderate call), `batched` (the text
     knee with 32 items per ModerateBatch call, P99 per call 500 ms), `client` (the text knee of many
     concurrent single-item callers through `auditmesh.client`, which batches them: P99 per item),
     `stream` (the text knee with every item one message of a long-lived ModerateStream, through the
     library's chat helper), `isolation` (realtime tenant alone, then under a
     bulk flood of 5x the measured text capacity).
`--policy-profile` sets the auditmesh mesh's policies to one accuracy profile with the baselines in
the same run (`fast`: text_moderation only, the model the unbatched baseline calls).
Then the ratios auditmesh/direct and auditmesh/unbatched per mix at the SLO, and the issue's targets
next to the measured values. Progress goes to stderr. `--quick` is a smoke run (tiny steps, no
meaningful numbers) used by tests/bench.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import tempfile
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

import grpc

from bench.client_target import ClientSender, StreamSender
from bench.cpu import ProcessCpu
from bench.direct import direct_capacity, measure_direct
from bench.isolation import run_isolation
from bench.loadgen import Arrival, Sender, run_open_loop
from bench.lowload import run_lowload
from bench.machine import CpuAccount, machine
from bench.meshes import auditmesh_mesh, modality_clients, running_mesh, unbatched_mesh
from bench.modelstats import StatsProbe
from bench.payloads import BenchInputs
from bench.router_target import CHANNEL_OPTIONS, BatchRouterSender, HealthSender, RouterSender
from bench.scenarios import BULK, MIXES, REALTIME, TENANTS, Plan, Slo
from bench.stats import ratio
from bench.steps import sweep, wait_idle
from bench.unbatched_target import UnbatchedSender
from services.launcher import Mesh

SCENARIOS = ("direct", "unbatched", "auditmesh", "batched", "client", "stream", "isolation", "lowload")
#: Text scenarios through the client library (bench/client_target.py), compared with the unbatched text knee.
LIBRARY_SCENARIOS = ("client", "stream")
#: `batched`: text items per ModerateBatch call (clients that batch, e.g. a bulk re-scan), and the
#: P99 each call must meet: a batching client trades latency for throughput, so its SLO is looser
#: than a chat line's (measured at the text SLO too, a 32-item call takes ~16 ms when idle, and
#: the knee is then set by two calls colliding, not by capacity).
BATCH_ITEMS_PER_CALL = 32
BATCH_SLO_MS = 500.0


async def warm_up(sender: Sender, kinds: Sequence[str], tenant: str, per_kind: int = 4) -> None:
    """A few calls of each kind, one at a time: first calls open connections and fill caches."""
    for i in range(per_kind * len(kinds)):
        await run_open_loop(sender, [Arrival(0.0, kinds[i % len(kinds)], tenant, i)])


def process_cpu(mesh: Mesh) -> ProcessCpu:
    """CPU accounting for the mesh's service processes and this one (the load generator)."""
    return ProcessCpu({**{name: process.pid for name, process in mesh.processes.items()}, "generator": os.getpid()})


def _kinds(plan: Plan) -> list[str]:
    return sorted({kind for mix in plan.mixes for kind in MIXES[mix].kinds} | {"text"})


async def bench_unbatched(inputs: BenchInputs, plan: Plan, slo: Slo, workdir: Path) -> dict[str, Any]:
    """Knee per mix of the modality services called one item per RPC, batching off."""
    with running_mesh(unbatched_mesh(workdir), with_router=False) as mesh:
        async with modality_clients(mesh) as clients:
            probe = StatsProbe(clients)
            sender = UnbatchedSender(clients, inputs, deadlines_s=slo.deadlines_s())
            await warm_up(sender, _kinds(plan), "unbatched")
            await wait_idle(probe)
            cpu = process_cpu(mesh)
            return {name: await sweep(sender, probe, MIXES[name], {"unbatched": 1.0}, slo, plan, label="unbatched",
                                      cpu=cpu)
                    for name in plan.mixes}


async def bench_auditmesh(inputs: BenchInputs, plan: Plan, slo: Slo, workdir: Path, scenarios: Sequence[str],
                          direct_batch1_ms: float | None, profile: str | None = None) -> dict[str, Any]:
    """Low load, the knee per mix, and isolation, all through the router of one mesh (its policies set
    to `profile` when given)."""
    result: dict[str, Any] = {}
    tenants = {t.id: t.share for t in TENANTS}
    with running_mesh(auditmesh_mesh(workdir, TENANTS, profile), with_router=True) as mesh:
        async with modality_clients(mesh) as clients, contextlib.AsyncExitStack() as stack:
            # One channel per router lane; each tenant calls the lane of its QoS class.
            lanes = {service: await stack.enter_async_context(grpc.aio.insecure_channel(mesh.address(service),
                                                                                        options=CHANNEL_OPTIONS))
                     for service in mesh.routers}
            channels = {t.id: lanes[mesh.router_for(t.qos_class)] for t in TENANTS}
            channel = channels[REALTIME.id]
            probe = StatsProbe(clients)
            sender = RouterSender(channels, inputs, keys={t.id: t.key for t in TENANTS}, deadlines_s=slo.deadlines_s())
            await warm_up(sender, _kinds(plan), REALTIME.id)
            await wait_idle(probe)
            if "lowload" in scenarios:
                result["lowload"] = await run_lowload(sender, HealthSender(channel), probe,
                                                      requests=plan.lowload_requests, direct_batch1_ms=direct_batch1_ms)
            cpu = process_cpu(mesh)
            mixes = {name: await sweep(sender, probe, MIXES[name], tenants, slo, plan, label="auditmesh", cpu=cpu)
                     for name in (plan.mixes if "auditmesh" in scenarios else ())}
            if mixes:
                result["mixes"] = mixes
                result["degraded_by_tenant"] = dict(sender.degraded)
                result["error_details"] = dict(sender.error_details.most_common())
            if "batched" in scenarios:
                result["batched"] = await sweep_batched(channels, inputs, probe, tenants, slo, plan, cpu)
            addresses = {t.id: mesh.address(mesh.router_for(t.qos_class)) for t in TENANTS}
            for scenario in (s for s in LIBRARY_SCENARIOS if s in scenarios):
                result[scenario] = await sweep_library(scenario, addresses, inputs, probe, tenants, slo, plan, cpu)
            if "isolation" in scenarios:
                text = (mixes.get("text") or ({"capacity_rps": plan.capacity_rps} if plan.capacity_rps else None)
                        or await sweep(sender, probe, MIXES["text"], tenants, slo, plan, label="capacity", cpu=cpu))
                result["isolation"] = await run_isolation(mesh.address(mesh.router_for(BULK.qos_class)), channel, probe, inputs,
                                                          capacity_rps=text["capacity_rps"], slo=slo, plan=plan, cpu=cpu)
    return result


async def sweep_batched(channels: Mapping[str, grpc.aio.Channel], inputs: BenchInputs, probe: StatsProbe,
                        tenants: Mapping[str, float], slo: Slo, plan: Plan, cpu: ProcessCpu) -> dict[str, Any]:
    """The text knee when clients send `BATCH_ITEMS_PER_CALL` items per ModerateBatch call: rates are
    calls/s, each call must meet `BATCH_SLO_MS` at P99 as a whole; `knee_items_per_s` = knee goodput x items."""
    slo = replace(slo, p99_ms={**slo.p99_ms, "text": BATCH_SLO_MS}, deadline_ms={**slo.deadline_ms, "text": 2 * BATCH_SLO_MS})
    sender = BatchRouterSender(channels, inputs, keys={t.id: t.key for t in TENANTS}, deadlines_s=slo.deadlines_s(),
                               items_per_call=BATCH_ITEMS_PER_CALL)
    text = MIXES["text"]
    mix = replace(text, start_rps=max(text.start_rps / BATCH_ITEMS_PER_CALL, 1.0),
                  max_rps=text.max_rps / BATCH_ITEMS_PER_CALL)
    swept = await sweep(sender, probe, mix, tenants, slo, plan, label=f"auditmesh batch of {BATCH_ITEMS_PER_CALL}", cpu=cpu)
    goodput = swept.get("knee_goodput_rps")
    return {**swept, "items_per_call": BATCH_ITEMS_PER_CALL,
            "knee_items_per_s": round(goodput * BATCH_ITEMS_PER_CALL, 1) if goodput else None,
            "error_details": dict(sender.error_details.most_common())}


#: The image knee through the mesh before issue 15 (the 2026-11-29 run, recorded in git history: 4.98/s at
#: the shipped configs of then). Not from this invocation: the one target here that is not.
IMAGE_KNEE_BEFORE_RPS = 4.98
#: The mixed mix is 10 % images: a mixed rate of R offers R x this images/s.
MIXED_IMAGE_SHARE = 0.1


async def sweep_library(scenario: str, addresses: Mapping[str, str], inputs: BenchInputs, probe: StatsProbe,
                        tenants: Mapping[str, float], slo: Slo, plan: Plan, cpu: ProcessCpu) -> dict[str, Any]:
    """The text knee (P99 per item) through `auditmesh.client`: `client` (single-item calls, batched by
    the library) or `stream` (one ModerateStream message per item, the library's chat helper)."""
    keys = {t.id: t.key for t in TENANTS}
    sender: ClientSender | StreamSender
    if scenario == "client":
        sender = ClientSender(addresses, inputs, keys=keys, deadlines_s=slo.deadlines_s())
    else:
        sender = StreamSender(addresses, inputs, keys=keys, deadlines_s=slo.deadlines_s())
    async with sender:
        await warm_up(sender, ["text"], REALTIME.id)
        await wait_idle(probe)
        swept = await sweep(sender, probe, MIXES["text"], tenants, slo, plan, label=scenario, cpu=cpu)
    extra: dict[str, Any] = {"batch_calls": sender.batch_calls} if isinstance(sender, ClientSender) else {}
    return {**swept, "degraded_by_tenant": dict(sender.degraded), "error_details": dict(sender.error_details.most_common()),
            **extra}


def ratio_interval(numerator: Any, denominator: Any) -> list[float | None] | None:
    """[low, high] of a ratio of two knees from their intervals ([low, high] goodput each): low = the
    numerator's low over the denominator's high, high = the other way round. None when either knee
    is missing; an end is None when an interval is open there."""
    if not numerator or not denominator:
        return None
    (n_low, n_high), (d_low, d_high) = numerator, denominator
    return [ratio(n_low, d_high) if d_high else None, ratio(n_high, d_low) if n_high and d_low else None]


def _knee(path: Mapping[str, Any] | None, name: str) -> Mapping[str, Any]:
    return (path or {}).get(name) or {}


def comparisons(plan: Plan, direct: Mapping[str, Any] | None, unbatched: Mapping[str, Any] | None,
                auditmesh: Mapping[str, Any] | None) -> dict[str, Any]:
    """Per mix: requests/s at the SLO knee for each path, the ratios auditmesh/direct and
    auditmesh/unbatched, and the latter's interval from the two knees' intervals (all from this run)."""
    result = {}
    for name in plan.mixes:
        mesh_knee = _knee((auditmesh or {}).get("mixes"), name)
        plain_knee = _knee(unbatched, name)
        mesh, plain = mesh_knee.get("knee_goodput_rps"), plain_knee.get("knee_goodput_rps")
        limit = direct_capacity(direct["item_seconds"], MIXES[name].kinds) if direct else None
        result[name] = {"auditmesh_rps": mesh, "unbatched_rps": plain, "direct_rps": limit,
                        "auditmesh_over_direct": ratio(mesh, limit), "auditmesh_over_unbatched": ratio(mesh, plain)}
        interval = ratio_interval(mesh_knee.get("knee_goodput_interval_rps"), plain_knee.get("knee_goodput_interval_rps"))
        if interval is not None:
            result[name]["auditmesh_over_unbatched_interval"] = interval
    batched = (auditmesh or {}).get("batched")
    if batched:  # text items through ModerateBatch calls, against the same text baselines
        items = batched.get("knee_items_per_s")
        plain = (unbatched or {}).get("text", {}).get("knee_goodput_rps")
        limit = direct_capacity(direct["item_seconds"], MIXES["text"].kinds) if direct else None
        result["text_batched"] = {"items_per_call": batched["items_per_call"], "auditmesh_items_per_s": items,
                                  "unbatched_rps": plain, "direct_rps": limit, "auditmesh_over_direct": ratio(items, limit),
                                  "auditmesh_over_unbatched": ratio(items, plain)}
    plain_text = _knee(unbatched, "text")
    for scenario in LIBRARY_SCENARIOS:  # single-item callers through the library, against the same text baseline
        library = (auditmesh or {}).get(scenario)
        if library:
            row = {"auditmesh_rps": library.get("knee_goodput_rps"), "unbatched_rps": plain_text.get("knee_goodput_rps"),
                   "p99_ms_at_knee": library.get("knee_p99_ms"),
                   "auditmesh_over_unbatched": ratio(library.get("knee_goodput_rps"), plain_text.get("knee_goodput_rps"))}
            interval = ratio_interval(library.get("knee_goodput_interval_rps"), plain_text.get("knee_goodput_interval_rps"))
            if interval is not None:
                row["auditmesh_over_unbatched_interval"] = interval
            result[f"text_{scenario}"] = row
    return result


def mixed_text_p99_up_to_image_capacity(auditmesh: Mapping[str, Any] | None, slo: float = 50.0) -> dict[str, Any] | None:
    """The mixed mix's worst text P99 over its steps whose image rate (10 % of the offered rate) is at
    most the image knee of the same run, and whether every one of them met `slo`; None without both sweeps."""
    mixes = (auditmesh or {}).get("mixes") or {}
    image_knee = (mixes.get("image") or {}).get("knee_goodput_rps")
    mixed = mixes.get("mixed")
    if not image_knee or not mixed:
        return None
    steps = [s for s in mixed["steps"] if s["offered_rps"] * MIXED_IMAGE_SHARE <= image_knee and "text" in s["by_kind"]]
    worst = max((s["by_kind"]["text"]["p99_ms"] for s in steps), default=None)
    return {"image_capacity_rps": image_knee, "mixed_rates": [s["offered_rps"] for s in steps],
            "worst_text_p99_ms": worst, "met": worst is not None and worst <= slo}


def _met(value: Any, op: str, bound: float, interval: Sequence[float | None] | None = None) -> bool | None:
    if value is None:
        return None
    if interval is not None:  # an interval that crosses the target is not met
        end = interval[0] if op == ">=" else interval[1]
        return end is not None and bool(end >= bound if op == ">=" else end <= bound)
    return bool(value >= bound if op == ">=" else value <= bound)


def targets(ratios: Mapping[str, Any], auditmesh: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The issue's targets next to what was measured (`met` is None when not measured; a ratio with an
    interval is met only when its whole interval is on the right side of the target)."""
    text = ratios.get("text", {})
    mixed = ratios.get("mixed", {})
    isolation = (auditmesh or {}).get("isolation") or {}
    lowload = (auditmesh or {}).get("lowload") or {}
    rejection = (isolation.get("bulk") or {}).get("rejection_latency_ms", {}).get("p99_ms")
    image = _knee((auditmesh or {}).get("mixes"), "image")
    image_interval = image.get("knee_goodput_interval_rps")
    mixed_text = mixed_text_p99_up_to_image_capacity(auditmesh)
    rows: list[tuple[str, str, float, Any, Any]] = [
        ("text auditmesh/direct at the SLO", ">=", 0.8, text.get("auditmesh_over_direct"), None),
        ("text auditmesh/unbatched at the SLO", ">=", 3.0, text.get("auditmesh_over_unbatched"),
         text.get("auditmesh_over_unbatched_interval")),
        ("mixed auditmesh/unbatched at the SLO", ">=", 1.5, mixed.get("auditmesh_over_unbatched"),
         mixed.get("auditmesh_over_unbatched_interval")),
        ("mixed: worst text P99 ms at rates up to the image capacity", "<=", 50.0,
         mixed_text["worst_text_p99_ms"] if mixed_text else None, None),
        (f"image knee / {IMAGE_KNEE_BEFORE_RPS} (before issue 15, the 2026-11-29 run; not this run)", ">=", 1.3,
         ratio(image.get("knee_goodput_rps"), IMAGE_KNEE_BEFORE_RPS),
         [ratio(end, IMAGE_KNEE_BEFORE_RPS) for end in image_interval] if image_interval else None),
        ("realtime P99 with flood / alone", "<=", 1.3, isolation.get("p99_ratio"), None),
        ("realtime success with flood", ">=", 0.999, isolation.get("realtime_success_ratio_with_flood"), None),
        ("bulk rejection latency P99 ms", "<=", 5.0, rejection, None),
        ("low-load overhead ms (P50 - model compute)", "<=", 3.0, lowload.get("overhead_ms"), None)]
    client = ratios.get("text_client")
    if client:  # issue 15 section 2: single-item callers through auditmesh.client
        rows.append(("text client/unbatched at the SLO (P99 per item)", ">=", 3.0, client.get("auditmesh_over_unbatched"),
                     client.get("auditmesh_over_unbatched_interval")))
    return [{"target": name, "goal": f"{op} {bound}", "measured": value,
             **({"interval": interval} if interval is not None else {}), "met": _met(value, op, bound, interval)}
            for name, op, bound, value, interval in rows]


def profile_summary(by_profile: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per profile: the text knee (goodput, requests/s) and the P99 at the knee, from its auditmesh run."""
    rows = []
    for profile, result in by_profile.items():
        text = (result.get("mixes") or {}).get("text") or {}
        rows.append({"profile": profile, "text_knee_rps": text.get("knee_goodput_rps"),
                     "text_p99_ms_at_knee": text.get("knee_p99_ms"),
                     "lowload_p50_ms": ((result.get("lowload") or {}).get("latency_ms") or {}).get("p50_ms")})
    return rows


async def run_profiles(plan: Plan, slo: Slo, scenarios: Sequence[str], profiles: Sequence[str]) -> dict[str, Any]:
    """The mesh scenarios once per profile, then the per-profile summary."""
    account = CpuAccount.start()
    report: dict[str, Any] = {"machine": machine(), "scenarios": list(scenarios), "plan": asdict(plan),
                              "slo": asdict(slo), "by_profile": {}}
    inputs = BenchInputs.build()
    for profile in profiles:
        print(f"[bench] auditmesh, policies at profile {profile}", file=sys.stderr, flush=True)
        with tempfile.TemporaryDirectory(prefix=f"auditmesh-bench-{profile}-") as tmp:
            report["by_profile"][profile] = await bench_auditmesh(inputs, plan, slo, Path(tmp), scenarios, None, profile)
    report["machine"]["foreign_cpu_share"] = account.foreign_cpu_share()
    report["profiles"] = profile_summary(report["by_profile"])
    return report


async def run(plan: Plan, slo: Slo, scenarios: Sequence[str], policy_profile: str | None = None) -> dict[str, Any]:
    """Every requested scenario, in the order of the module docstring, and the comparisons."""
    account = CpuAccount.start()
    report: dict[str, Any] = {"machine": machine(), "scenarios": list(scenarios), "plan": asdict(plan),
                              "slo": asdict(slo)}
    inputs = BenchInputs.build()
    direct = unbatched = auditmesh = None
    if "direct" in scenarios:
        print("[bench] direct (in-process models)", file=sys.stderr, flush=True)
        report["direct"] = direct = measure_direct(inputs, plan.direct, slo.p99_ms)
    with tempfile.TemporaryDirectory(prefix="auditmesh-bench-") as tmp:
        if "unbatched" in scenarios:
            report["unbatched"] = unbatched = await bench_unbatched(inputs, plan, slo, Path(tmp))
        if {"auditmesh", "batched", "isolation", "lowload", *LIBRARY_SCENARIOS} & set(scenarios):
            batch1 = direct["text"]["batch1_ms"] if direct else None
            report["auditmesh"] = auditmesh = await bench_auditmesh(inputs, plan, slo, Path(tmp), scenarios, batch1,
                                                                    policy_profile)
            report["auditmesh_policy_profile"] = policy_profile or "shipped"
    # Other work on the machine skews every number: say how much of it there was.
    report["machine"]["foreign_cpu_share"] = account.foreign_cpu_share()
    report["ratios"] = comparisons(plan, direct, unbatched, auditmesh)
    report["targets"] = targets(report["ratios"], auditmesh)
    return report


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.mesh_bench", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: tiny steps (~30 s), numbers not meaningful")
    parser.add_argument("--scenario", action="append", choices=SCENARIOS,
                        help="run only these (repeatable; default: all)")
    parser.add_argument("--mix", action="append", choices=sorted(MIXES), help="traffic mixes (repeatable)")
    parser.add_argument("--slo-text-ms", type=float, default=50.0, help="P99 SLO of text items (default 50)")
    parser.add_argument("--slo-image-ms", type=float, default=1000.0, help="P99 SLO of image items (default 1000)")
    parser.add_argument("--step-seconds", type=float, help="override the plan's seconds per load step")
    parser.add_argument("--policy-profile", choices=("fast", "balanced", "accurate"),
                        help="set every policy of the auditmesh mesh to this profile, baselines still in the same run "
                             "(fast = text_moderation only, the model the unbatched baseline calls)")
    parser.add_argument("--capacity-rps", type=float, default=0.0,
                        help="isolation without the auditmesh text sweep: take this as the text capacity (requests/s) "
                             "instead of measuring it (to compare runs at the same flood rate)")
    parser.add_argument("--profile", action="append", choices=("fast", "balanced", "accurate"),
                        help="run the mesh scenarios once per accuracy profile (repeatable); direct and unbatched "
                             "are not run then. Default scenarios with --profile: auditmesh")
    parser.add_argument("--flood-nice", type=int, default=0, choices=range(0, 20), metavar="0..19",
                        help="isolation: run the flood generator at this CPU niceness (default 0). Here it shares the "
                             "mesh's 2 cores; a real bulk client runs on its own hosts, which a nice generator "
                             "approximates. Reported as bulk_tenant.generator_nice")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    plan = Plan.quick() if args.quick else Plan.full()
    if args.mix:
        plan = plan.with_mixes(tuple(dict.fromkeys(args.mix)))
    if args.step_seconds:
        plan = replace(plan, step_s=args.step_seconds)
    if args.capacity_rps:
        plan = replace(plan, capacity_rps=args.capacity_rps)
    if args.flood_nice:
        plan = replace(plan, flood_nice=args.flood_nice)
    slo = Slo(p99_ms={"text": args.slo_text_ms, "image": args.slo_image_ms})
    if args.profile:
        chosen = tuple(s for s in (args.scenario or ("auditmesh",)) if s not in ("direct", "unbatched"))
        report = asyncio.run(run_profiles(plan, slo, chosen, tuple(dict.fromkeys(args.profile))))
    else:
        report = asyncio.run(run(plan, slo, tuple(args.scenario or SCENARIOS), args.policy_profile))
    report["command"] = " ".join(["python -m bench.mesh_bench", *(argv if argv is not None else sys.argv[1:])])
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
