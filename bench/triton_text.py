"""The project's text service vs a real Triton Inference Server's dynamic batcher, on the same model,
in one run. Prints JSON.

    python -m bench.triton_text [--slo-ms 50] [--step-s 4] [--repeats 2] [--via direct|router] [--quick]

Both serve `text_moderation` built by the text service's own `served_models` from config/text.yaml (same
ONNX files, same onnxruntime threads): ours is `services.text.server` (our batcher: continuous
batching, priorities), Triton's is `services/common/serving/pytriton_host.py` (Triton 2.51's dynamic
batcher, max_queue_delay 0, the same max batch size, one model instance). Each is started alone on the
same machine, and both run for the whole benchmark (an idle one costs next to nothing).

`--via direct` (default): open-loop Poisson load of single-text KServe ModelInfer calls to the service
(`DirectTextSender`: the text contract's input and the outputs the router reads, chat lines from
bench/payloads.py, the mesh's internal secret, which Triton ignores): the service and its
batcher alone. `--via router`: one Moderate per text through a router in front of each (the mesh's
path; the router's CPU then weighs on both alike). Knees per target on one rate ladder, interleaved
step by step, median P99 over the repeats (`bench.paired`); the ratio ours/Triton of the knees at the
same P99 target is the number the issue asks for (target >= 1.0).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, AsyncIterator, Sequence

import grpc
import numpy as np
import tritonclient.grpc.aio as triton_aio
from tritonclient.grpc import InferInput, InferRequestedOutput
from tritonclient.utils import InferenceServerException

from bench.loadgen import Arrival, Sender, poisson_arrivals, run_open_loop
from bench.machine import machine
from bench.meshes import running_mesh
from bench.paired import LadderPlan, add_ladder_arguments, paired_knees, parse_ladder_args, step_report
from bench.payloads import BenchInputs
from bench.router_target import CHANNEL_OPTIONS, RouterSender
from bench.side_router import side_router
from bench.stats import ratio
from bench.tenants import BenchTenant, tenants_yaml
from bench.triton_side import triton_server
from services.common.contracts import text as text_contract
from services.launcher import MODALITIES, Mesh, free_base_port

TENANT = BenchTenant("chat", "realtime")
TARGETS = ("auditmesh", "triton")


class DirectTextSender:
    """`bench.loadgen.Sender`: one `text_moderation` ModelInfer per arrival, as the router calls it."""

    def __init__(self, client: triton_aio.InferenceServerClient, inputs: BenchInputs, deadline_s: float) -> None:
        self._client = client
        self._texts = inputs.pool("text")
        self._deadline_s = deadline_s
        self._outputs = [InferRequestedOutput(name) for name in text_contract.ROUTER_OUTPUTS]
        self._headers = dict(Mesh.internal_metadata())

    async def __call__(self, arrival: Arrival) -> str:
        tensor = InferInput(text_contract.INPUT.name, [1, 1], "BYTES")
        tensor.set_data_from_numpy(np.array([[self._texts[arrival.index % len(self._texts)]]], dtype=np.object_))
        try:
            await self._client.infer(text_contract.MODEL_NAME, [tensor], outputs=self._outputs,
                                     client_timeout=self._deadline_s, headers=self._headers)
        except InferenceServerException as error:
            return str(error.status() or "UNKNOWN").removeprefix("StatusCode.")
        return "OK"


async def run_step(sender: Sender, rate_rps: float, duration_s: float, seed: int) -> dict[str, Any]:
    arrivals = poisson_arrivals(rate_rps, duration_s, kinds={"text": 1.0}, tenants={TENANT.id: 1.0}, seed=seed)
    started = time.perf_counter()
    outcomes = await run_open_loop(sender, arrivals)
    return step_report(rate_rps, outcomes, time.perf_counter() - started)


def text_service(tenants_file: Path, with_image_services: bool) -> contextlib.AbstractContextManager[Mesh]:
    """The text service (and vision and OCR, for the router's path), stopped on exit."""
    mesh = Mesh(free_base_port(), extra_env={"AUDITMESH_TENANTS_FILE": str(tenants_file)},
                output=subprocess.DEVNULL)
    return running_mesh(mesh, services=MODALITIES if with_image_services else ("text",), with_router=False)


@contextlib.asynccontextmanager
async def senders(args: argparse.Namespace, workdir: Path, ours: Mesh, triton: str) -> AsyncIterator[dict[str, Sender]]:
    inputs = BenchInputs.build(images=1)
    deadlines = {"text": max(1.0, 4 * args.slo_ms / 1000)}
    if args.via == "direct":
        clients = {"auditmesh": triton_aio.InferenceServerClient(ours.address("text")),
                   "triton": triton_aio.InferenceServerClient(triton)}
        try:
            yield {name: DirectTextSender(client, inputs, deadlines["text"]) for name, client in clients.items()}
        finally:
            for client in clients.values():
                await client.close()
        return
    tenants_file = workdir / "tenants.yaml"
    others = {m: ours.address(m) for m in MODALITIES}
    with side_router(workdir / "r-ours", others, tenants_file, {}, with_metrics=False,
                     output=subprocess.DEVNULL) as router_ours, \
            side_router(workdir / "r-triton", others | {"text": triton}, tenants_file, {}, with_metrics=False,
                        output=subprocess.DEVNULL) as router_triton:
        async with grpc.aio.insecure_channel(router_ours.address("router"), options=CHANNEL_OPTIONS) as a, \
                grpc.aio.insecure_channel(router_triton.address("router"), options=CHANNEL_OPTIONS) as b:
            keys = {TENANT.id: TENANT.key}
            yield {"auditmesh": RouterSender(a, inputs, keys=keys, deadlines_s=deadlines),
                   "triton": RouterSender(b, inputs, keys=keys, deadlines_s=deadlines)}


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="auditmesh-bench-triton-") as tmp:
        workdir = Path(tmp)
        tenants_file = workdir / "tenants.yaml"
        tenants_file.write_text(tenants_yaml([TENANT]), encoding="utf-8")
        with text_service(tenants_file, args.via == "router") as ours, \
                triton_server("text", output=subprocess.DEVNULL) as triton:
            async with senders(args, workdir, ours, triton.address) as by_target:
                for sender in by_target.values():  # connections, first calls
                    await run_step(sender, 20.0, 1.0, seed=99)
                plan = LadderPlan.from_args(args)

                async def step(target: str, rate: float, repeat: int) -> dict[str, Any]:
                    return await run_step(by_target[target], rate, args.step_s, seed=int(rate) * 10 + repeat)

                knees = await paired_knees(list(TARGETS), step, plan, "triton_text ")
    return {"benchmark": "triton_text", "machine": machine(), "via": args.via, "slo_p99_ms": args.slo_ms,
            "step_s": args.step_s, "repeats": args.repeats,
            "model": "text_moderation (services.text.server.served_models, config/text.yaml)",
            "triton": "tritonserver 2.51 (nvidia-pytriton 0.7.0), dynamic batcher, max_queue_delay_us 0, 1 instance",
            "knees": knees,
            "knee_ratio_auditmesh_over_triton": ratio(knees["auditmesh"]["knee_rps"], knees["triton"]["knee_rps"]),
            "target": "auditmesh >= 1.0x Triton at the same P99 target"}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.triton_text", description=__doc__.split("\n\n")[0])
    parser.add_argument("--via", choices=["direct", "router"], default="direct")
    add_ladder_arguments(parser, max_steps=12)
    return parse_ladder_args(parser, argv)


def main(argv: Sequence[str] | None = None) -> int:
    print(json.dumps(asyncio.run(bench(parse_args(argv))), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
