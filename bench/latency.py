"""Single-item latency per modality and end to end, on the real mesh. Prints JSON.

    python -m bench.latency [--requests 50] [--base-port 18100]

Starts the four services (like `make run`), warms them, then sends one request at a time (no
concurrency) and reports P50/P95/mean in milliseconds for:
  - each modality service called directly with tritonclient (KServe v2 ModelInfer, batch of 1);
  - the router (auditmesh.v1 Moderate) for a text item, an image item (vision + OCR + OCR text), and both.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Callable

import grpc
import numpy as np
import tritonclient.grpc as triton
from auditmesh.v1 import moderation_pb2 as pb
from auditmesh.v1 import moderation_pb2_grpc as pb_grpc

from services.launcher import Mesh
from services.router.tenants import hash_key
from bench.render import render_text_image  # the same images the tests use

KEY = "bench-key"


def measure(call: Callable[[], object], requests: int, warmup: int = 3) -> dict[str, float]:
    for _ in range(warmup):
        call()
    samples = []
    for _ in range(requests):
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1000)
    samples.sort()
    return {"p50_ms": round(statistics.median(samples), 2), "p95_ms": round(samples[int(0.95 * (len(samples) - 1))], 2),
            "mean_ms": round(statistics.fmean(samples), 2), "n": len(samples)}


def kserve_call(client: triton.InferenceServerClient, model: str, name: str, payload: bytes) -> Callable[[], object]:
    def call() -> object:
        tensor = triton.InferInput(name, [1, 1], "BYTES")
        tensor.set_data_from_numpy(np.array([[payload]], dtype=object))
        return client.infer(model, [tensor], headers=dict(Mesh.internal_metadata()))  # the mesh's internal secret
    return call


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=50)
    parser.add_argument("--base-port", type=int, default=18100)
    args = parser.parse_args()
    image = render_text_image(["Daily deals 2026", "内容审核测试 免费领取"], background="noisy", seed=1)
    text = "Thanks for the invite, see you on Friday at the usual place!".encode()
    with tempfile.TemporaryDirectory() as tmp:
        tenants = Path(tmp) / "tenants.yaml"
        tenants.write_text(f"tenants:\n  - id: bench\n    api_key_sha256: {hash_key(KEY)}\n    policies: [default]\n")
        mesh = Mesh(args.base_port, extra_env={"AUDITMESH_TENANTS_FILE": str(tenants)})
        try:
            mesh.start()
            results: dict[str, object] = {}
            for modality, model, payload in (("text", "text_moderation", text), ("vision", "image_safety", image),
                                             ("ocr", "ocr", image)):
                client = triton.InferenceServerClient(mesh.address(modality))
                results[f"{modality}_direct"] = measure(kserve_call(client, model, "TEXT" if modality == "text" else "IMAGE", payload),
                                                        args.requests)
                client.close()
            with grpc.insecure_channel(mesh.address("router")) as channel:
                stub = pb_grpc.ModerationServiceStub(channel)

                def moderate(*parts: pb.Part) -> Callable[[], object]:
                    request = pb.ModerateRequest(item=pb.Item(id="b", parts=list(parts)))
                    return lambda: stub.Moderate(request, metadata=[("x-api-key", KEY)], timeout=30)
                results["router_text"] = measure(moderate(pb.Part(text=text.decode())), args.requests)
                results["router_image"] = measure(moderate(pb.Part(image=pb.Image(data=image))), args.requests)
                results["router_text_and_image"] = measure(moderate(pb.Part(text=text.decode()), pb.Part(image=pb.Image(data=image))),
                                                           args.requests)
        finally:
            mesh.stop()
    results["image"] = "640x480 PNG, 2 rendered lines (Chinese + English), noisy background"
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
