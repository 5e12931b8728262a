"""Does a tenant training its classifier slow moderation for the others? (issue 40), printed as JSON.

    python -m bench.training_interference                  # 25,000 examples, 40 items/s
    python -m bench.training_interference --examples 5000 --rate 20 --alone-s 20

A mesh (text service and the interactive router lane, isolated state) serves a realtime tenant (acme)
at an open-loop Poisson rate of short texts from the naturalistic test split. Phase `alone`: that load
only. Phase `training`: the same load while `auditmesh classifier train` (its own process, niced 10 as
the CLI does by default, one encoder thread) trains on `--examples` labelled texts, until it finishes.
Reported per phase: the tenant's latency (P50/P95/P99/max, from send to answer) and status counts; the
P99 ratio (training / alone), whether training's P99 stays under the realtime SLO (`--slo-ms`, default
50 ms: bench/scenarios.py), and the training run's seconds. Compare only within one run on a quiet
machine (`foreign_cpu_share` near 0; the training process is this run's own).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

import grpc
from auditmesh.v1 import moderation_pb2 as pb
from auditmesh.v1 import moderation_pb2_grpc as pb_grpc

from bench.loadgen import Arrival, poisson_arrivals, run_open_loop
from bench.machine import CpuAccount, code_version
from bench.natural_quality import load_split
from bench.stats import summarize_ms
from services.common.taxonomy import TEXT_CATEGORIES
from services.launcher import ROOT, Mesh, free_base_port

__all__ = ["main"]

KEY = "demo-acme-key"  # config/tenants.yaml: acme is a realtime tenant


def write_examples(path: Path, count: int) -> None:
    """`count` labelled texts from the naturalistic training and dev splits (repeated with a suffix past them)."""
    base = load_split("zh", "train") + load_split("en", "train") + load_split("zh", "dev") + load_split("en", "dev")
    with open(path, "w", encoding="utf-8") as handle:
        for i in range(count):
            row = base[i % len(base)]
            text = str(row["text"]) if i < len(base) else f"{row['text']} #{i}"
            handle.write(json.dumps({"text": text, "labels": {c: int(c in row["labels"]) for c in TEXT_CATEGORIES}},
                                    ensure_ascii=False) + "\n")


async def phase(address: str, texts: Sequence[str], rate: float, seconds: float, seed: int,
                until: subprocess.Popen[bytes] | None = None) -> dict[str, Any]:
    """Open-loop load for `seconds` (or, with `until`, until that process ends, in rounds of `seconds`)."""
    latencies: list[float] = []
    codes: Counter[str] = Counter()
    async with grpc.aio.insecure_channel(address) as channel:
        stub = pb_grpc.ModerationServiceStub(channel)

        async def send(arrival: Arrival) -> str:
            text = texts[arrival.index % len(texts)]
            try:
                await stub.Moderate(pb.ModerateRequest(item=pb.Item(parts=[pb.Part(text=text)])),
                                    metadata=[("x-api-key", KEY)], timeout=0.5)
                return "OK"
            except grpc.aio.AioRpcError as error:
                return str(error.code().name)

        round_index = 0
        while True:
            arrivals = poisson_arrivals(rate, seconds, kinds={"text": 1.0}, tenants={"acme": 1.0}, seed=seed + round_index)
            for outcome in await run_open_loop(send, arrivals):
                codes[outcome.code] += 1
                if outcome.code == "OK":
                    latencies.append(outcome.latency_s)
            round_index += 1
            if until is None or until.poll() is not None:
                break
    return {"seconds": round(seconds * round_index, 1), "latency": summarize_ms(latencies), "codes": dict(codes)}


async def run(args: argparse.Namespace) -> dict[str, Any]:
    texts = [str(r["text"]) for r in load_split("zh", "test") + load_split("en", "test")]
    mesh = Mesh(base_port=free_base_port())
    router = mesh.routers[0]
    account = CpuAccount.start()
    try:
        mesh.start_services(["text", router], 180.0)
        address = mesh.address(router)
        await phase(address, texts, args.rate, 5.0, seed=99)  # warm-up, not reported
        alone = await phase(address, texts, args.rate, args.alone_s, seed=1)
        with tempfile.TemporaryDirectory() as folder:
            examples = Path(folder) / "labels.jsonl"
            write_examples(examples, args.examples)
            started = time.monotonic()
            trainer = subprocess.Popen([sys.executable, "-m", "services.cli", "classifier", "train", "--examples", str(examples),
                                        "--tenant", "bench", "--out", str(Path(folder) / "out"), "--nice", str(args.nice)],
                                       cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                       env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
            training = await phase(address, texts, args.rate, 10.0, seed=2, until=trainer)
            trained = trainer.wait()
            training_s = time.monotonic() - started
    finally:
        mesh.stop()
    p99_alone, p99_training = alone["latency"].get("p99_ms"), training["latency"].get("p99_ms")
    return {"bench": "training_interference", **code_version(), "rate_rps": args.rate, "examples": args.examples,
            "nice": args.nice, "alone": alone, "training": training,
            "trainer": {"exit_code": trained, "seconds": round(training_s, 1)},
            "p99_ratio": round(p99_training / p99_alone, 2) if p99_alone and p99_training else None,
            "slo_p99_ms": args.slo_ms, "training_p99_within_slo": p99_training is not None and p99_training <= args.slo_ms,
            # after the mesh stopped: its processes (and the trainer) are reaped children, this run's own
            "foreign_cpu_share": account.foreign_cpu_share()}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.training_interference", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", type=int, default=25_000, help="labelled texts the tenant trains on (default 25,000)")
    parser.add_argument("--rate", type=float, default=40.0, help="the realtime tenant's items per second (default 40)")
    parser.add_argument("--alone-s", type=float, default=30.0, help="seconds of the phase without training (default 30)")
    parser.add_argument("--nice", type=int, default=10, help="the trainer's niceness (default 10, the CLI's)")
    parser.add_argument("--slo-ms", type=float, default=50.0, help="the realtime P99 target (default 50 ms)")
    args = parser.parse_args(argv)
    print(json.dumps(asyncio.run(run(args)), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
