"""Known content through the whole mesh (issue 42): throughput and latency of a repeated-image workload, the
match stage short-circuiting exact matches of a blocking bank versus running every stage. Prints JSON.

    python -m bench.match_mesh [--seconds 15] [--concurrency 8] [--quick]

One mesh (router, text, vision, OCR, match; shipped configs, verdict cache off as shipped, so every item
is judged; one benchmark tenant with the router's default quota, `bench/tenants.py`) and one photo-like 640 x 480 JPEG banked by its bytes (BankAdmin `AddContent` on the admin port:
SHA-256, MD5 and PDQ) in a shared bank that blocks. The default policy is stored twice with `matches:`
on, `short_circuit: true` and `false`, and each is activated in turn, `--rounds` times, alternating
(`on`, `off`, `on`, ...): each round sends the banked image for `--seconds` from `--concurrency`
closed-loop callers (a new item id each call), after a short warm-up. Reported per mode: items per
second (the median over its rounds), P50 / P99 latency over all its calls, how many answers were
BLOCK and short-circuited, and the ratio on/off of the throughput. On a 2-core machine the services
share the cores, so what short-circuiting saves (vision and OCR of each repeat) shows as throughput.
Compare only within one run on a quiet machine (`foreign_cpu_share` near 0).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

import grpc
import yaml
from auditmesh.v1 import admin_pb2 as apb
from auditmesh.v1 import admin_pb2_grpc as apb_grpc
from auditmesh.v1 import moderation_pb2 as pb
from auditmesh.v1 import moderation_pb2_grpc as pb_grpc

from bench.machine import CpuAccount, code_version
from bench.meshes import auditmesh_mesh, running_mesh
from bench.render import render_photo_like
from bench.stats import summarize_ms
from bench.tenants import BenchTenant
from services.launcher import MATCH, MODALITIES, ROOT, Mesh

__all__ = ["main"]

ADMIN = [("x-admin-key", "demo-admin-key")]
#: The caller: a benchmark tenant with the router's default quota (the demo tenants' quotas would cap the rate).
TENANT = BenchTenant("reposts", "standard")
TENANT_KEY = [("x-api-key", TENANT.key)]
BANK = "bench-known"


def banked_image() -> bytes:
    """The repeated image: photo-like, 640 x 480, as a JPEG (what a re-post carries)."""
    from PIL import Image

    buffer = io.BytesIO()
    Image.open(io.BytesIO(render_photo_like((640, 480), seed=42))).convert("RGB").save(buffer, "JPEG", quality=85)
    return buffer.getvalue()


def policy_version(short_circuit: bool) -> str:
    """The shipped default policy with matching on, the bench bank blocking, short-circuit as given."""
    document = yaml.safe_load((ROOT / "config" / "policies" / "default.yaml").read_text(encoding="utf-8"))
    document.update(version=f"bench-match-{'on' if short_circuit else 'off'}",
                    matches={"short_circuit": short_circuit, "banks": {BANK: "block"}})
    return yaml.safe_dump(document, sort_keys=False, allow_unicode=True)


async def closed_loop(stub: pb_grpc.ModerationServiceStub, image: bytes, seconds: float, concurrency: int,
                      tag: str, key: Sequence[tuple[str, str]] = TENANT_KEY) -> dict[str, Any]:
    """`concurrency` callers each sending the image one call after another for `seconds` (as the tenant of `key`)."""
    latencies: list[float] = []
    outcomes = {"block": 0, "short_circuited": 0, "errors": 0}
    codes: dict[str, int] = {}
    deadline = time.monotonic() + seconds

    async def caller(number: int) -> None:
        sent = 0
        while time.monotonic() < deadline:
            request = pb.ModerateRequest(item=pb.Item(id=f"{tag}-{number}-{sent}", parts=[pb.Part(image=pb.Image(data=image))]))
            started = time.perf_counter()
            try:
                response = await stub.Moderate(request, metadata=key, timeout=10.0)
            except grpc.aio.AioRpcError as error:
                outcomes["errors"] += 1
                codes[error.code().name] = codes.get(error.code().name, 0) + 1
                await asyncio.sleep(0.05)  # never a tight loop of refused calls
                continue
            finally:
                sent += 1
            latencies.append(time.perf_counter() - started)
            outcomes["block"] += response.decision == pb.BLOCK
            outcomes["short_circuited"] += response.short_circuited
    started = time.monotonic()
    await asyncio.gather(*(caller(n) for n in range(concurrency)))
    elapsed = time.monotonic() - started
    return {"items": len(latencies), "seconds": round(elapsed, 2), "items_per_s": round(len(latencies) / elapsed, 2),
            "latencies_s": latencies, **outcomes, "error_codes": codes}


async def measure(mesh: Mesh, image: bytes, *, seconds: float, concurrency: int, rounds: int) -> dict[str, Any]:
    async with grpc.aio.insecure_channel(mesh.address(mesh.routers[0])) as public, \
            grpc.aio.insecure_channel(mesh.admin_address) as admin_channel:
        stub = pb_grpc.ModerationServiceStub(public)
        admin, banks = apb_grpc.PolicyAdminStub(admin_channel), apb_grpc.BankAdminStub(admin_channel)
        await banks.CreateBank(apb.CreateBankRequest(name=BANK, settings=apb.BankSettings(
            shared=True, category="violence", action="block")), metadata=ADMIN)
        await banks.AddContent(apb.AddContentRequest(bank=BANK, contents=[apb.BankContent(image=image, content_id="known-1")]),
                               metadata=ADMIN)
        for short_circuit in (True, False):
            await admin.PutVersion(apb.PutVersionRequest(kind=apb.POLICY, name="default", content=policy_version(short_circuit)),
                                   metadata=ADMIN)
        runs: dict[str, list[dict[str, Any]]] = {"on": [], "off": []}
        for number in range(rounds):
            for mode in ("on", "off"):
                await admin.Activate(apb.ActivateRequest(kind=apb.POLICY, name="default", version=f"bench-match-{mode}"),
                                     metadata=ADMIN)
                await _until_matching(stub, image, short_circuit=mode == "on")
                await closed_loop(stub, image, 1.0, concurrency, f"warm-{mode}-{number}")
                runs[mode].append(await closed_loop(stub, image, seconds, concurrency, f"{mode}-{number}"))
    report: dict[str, Any] = {}
    for mode, done in runs.items():
        every = [s for run in done for s in run.pop("latencies_s")]
        report[mode] = {"items_per_s": statistics.median(run["items_per_s"] for run in done),
                        "rounds": done, "latency_ms": summarize_ms(every),
                        "block": sum(run["block"] for run in done), "short_circuited": sum(run["short_circuited"] for run in done),
                        "errors": sum(run["errors"] for run in done)}
    off = report["off"]["items_per_s"]
    report["throughput_ratio_on_off"] = round(report["on"]["items_per_s"] / off, 2) if off else None
    return report


async def _until_matching(stub: pb_grpc.ModerationServiceStub, image: bytes, *, short_circuit: bool,
                          timeout_s: float = 30.0) -> None:
    """Wait until the router serves the activated version and the match service has the bank loaded."""
    deadline = time.monotonic() + timeout_s
    while True:
        response = await stub.Moderate(pb.ModerateRequest(item=pb.Item(id="probe", parts=[pb.Part(image=pb.Image(data=image))])),
                                       metadata=TENANT_KEY, timeout=10.0)
        matched = any(e.HasField("match") for e in response.evidence)
        if matched and response.short_circuited == short_circuit:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"the banked image was not matched (short_circuit={short_circuit}) within {timeout_s:.0f} s")
        await asyncio.sleep(0.2)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.match_mesh", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=15.0, help="seconds per round and mode (default 15)")
    parser.add_argument("--concurrency", type=int, default=8, help="closed-loop callers (default 8)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, each mode once per round (default 3)")
    parser.add_argument("--quick", action="store_true", help="2 s, 1 round: a smoke run, not a measurement")
    args = parser.parse_args(argv)
    if args.quick:
        args.seconds, args.rounds = 2.0, 1
    account = CpuAccount.start()
    image = banked_image()
    with tempfile.TemporaryDirectory() as folder:
        # its policy store, audit log and banks in a folder of its own, removed at stop
        mesh = auditmesh_mesh(Path(folder), [TENANT])
        with running_mesh(mesh, with_router=True, services=(*MODALITIES, MATCH)):
            result = asyncio.run(measure(mesh, image, seconds=args.seconds, concurrency=args.concurrency,
                                         rounds=args.rounds))
    report = {"bench": "match_mesh", **code_version(), "image_bytes": len(image), "seconds": args.seconds,
              "concurrency": args.concurrency, "rounds": args.rounds, **result,
              "foreign_cpu_share": account.foreign_cpu_share()}
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
