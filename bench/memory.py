"""Memory of the router and the image services under large requests (issue 12 item 14).

Starts the whole mesh (shipped config, state in a temporary folder), reads each process's resident
memory (VmRSS) and peak (VmHWM) from /proc, then sends `--rounds` rounds of large requests:

* a ModerateBatch of `--big-images` PNGs of just under the router's `limits.max_image_bytes`
  (a small picture with text, padded with a private ancillary chunk: big in bytes, cheap to decode);
* a Moderate of one photo-sized noisy image of `--pixels` pixels (big when decoded: OCR's and vision's
  decoding buffers);

and reads the memory again after each round and once more `--settle-s` after the last. Prints JSON:
per process RSS before, after each round, settled, and the peak, in MiB, plus how the requests were
answered.

Run: `python -m bench.memory [--rounds 5 --big-images 6 --pixels 12000000]`
"""

from __future__ import annotations

import argparse
import io
import json
import math
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any, Sequence

import grpc
import numpy as np
from auditmesh.v1 import moderation_pb2 as pb
from auditmesh.v1 import moderation_pb2_grpc as pb_grpc
from PIL import Image, ImageDraw

from services.launcher import Mesh, free_base_port
from services.router.tenants import hash_key

KEY = "bench-memory-key"
WATCHED = ("router", "vision", "ocr", "text")
OPTIONS = [("grpc.max_send_message_length", 80 << 20), ("grpc.max_receive_message_length", 80 << 20)]


def memory_mib(pid: int) -> dict[str, float]:
    """VmRSS and VmHWM (peak RSS) of `pid`, in MiB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            fields[name] = round(int(value.split()[0]) / 1024, 1)
    return fields


def padded_png(total_bytes: int) -> bytes:
    """A valid PNG of `total_bytes`: a small picture with text plus a private ancillary chunk."""
    image = Image.new("RGB", (320, 80), "white")
    ImageDraw.Draw(image).text((10, 30), "benchmark caption", fill="black")
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    small = buffer.getvalue()
    padding = b"\0" * (total_bytes - len(small) - 12)
    chunk = struct.pack(">I", len(padding)) + b"auPd" + padding + struct.pack(">I", zlib.crc32(b"auPd" + padding))
    return small[:-12] + chunk + small[-12:]


def noisy_image(pixels: int, seed: int = 7) -> bytes:
    """A JPEG of about `pixels` pixels (4:3) of smooth noise: big once decoded."""
    width = int(math.sqrt(pixels * 4 / 3))
    height = pixels // width
    rng = np.random.default_rng(seed)
    small = rng.integers(0, 255, (height // 16 + 1, width // 16 + 1, 3), dtype=np.uint8)
    image = Image.fromarray(small).resize((width, height), Image.Resampling.BILINEAR)
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=90)
    return buffer.getvalue()


def item(item_id: str, data: bytes) -> pb.Item:
    return pb.Item(id=item_id, parts=[pb.Part(image=pb.Image(data=data))])


def outcome(response: pb.ModerateResponse) -> str:
    if response.HasField("error"):
        return f"error {response.error.code}"
    return str(pb.Decision.Name(response.decision)) + (" degraded" if response.degraded else "")


def run(args: argparse.Namespace) -> dict[str, Any]:
    state = Path(tempfile.mkdtemp(prefix="bench-memory-"))
    tenants = state / "tenants.yaml"
    tenants.write_text(f"tenants:\n  - id: bench\n    api_key_sha256: {hash_key(KEY)}\n    policies: [default]\n")
    mesh = Mesh(base_port=free_base_port(), extra_env={"AUDITMESH_TENANTS_FILE": str(tenants)},
                output=subprocess.DEVNULL)
    big, photo = padded_png(args.big_bytes), noisy_image(args.pixels)
    report: dict[str, Any] = {"big_image_bytes": len(big), "photo_bytes": len(photo), "photo_pixels": args.pixels,
                              "big_images_per_batch": args.big_images, "rounds": args.rounds}
    try:
        mesh.start()
        pids = {name: mesh.processes[name].pid for name in WATCHED}
        with grpc.insecure_channel(mesh.address("router"), options=OPTIONS) as channel:
            stub = pb_grpc.ModerationServiceStub(channel)
            metadata = [("x-api-key", KEY)]
            stub.Moderate(pb.ModerateRequest(item=pb.Item(id="warm", parts=[pb.Part(text="hello")])), metadata=metadata,
                          timeout=30)
            report["before_mib"] = {name: memory_mib(pid)["VmRSS"] for name, pid in pids.items()}
            rounds, answers = [], []
            for index in range(args.rounds):
                batch = pb.ModerateBatchRequest(items=[item(f"big-{index}-{i}", big) for i in range(args.big_images)])
                answers += [outcome(r) for r in stub.ModerateBatch(batch, metadata=metadata, timeout=120).results]
                single = pb.ModerateRequest(request_id=f"photo-{index}", item=item("photo", photo), deadline_ms=30000)
                answers.append(outcome(stub.Moderate(single, metadata=metadata, timeout=60)))
                rounds.append({name: memory_mib(pid)["VmRSS"] for name, pid in pids.items()})
                print(f"round {index + 1}: {rounds[-1]}", file=sys.stderr)
            time.sleep(args.settle_s)
            report["after_each_round_mib"] = rounds
            report["settled_mib"] = {name: memory_mib(pid)["VmRSS"] for name, pid in pids.items()}
            report["peak_mib"] = {name: memory_mib(pid)["VmHWM"] for name, pid in pids.items()}
            report["answers"] = {answer: answers.count(answer) for answer in sorted(set(answers))}
    finally:
        mesh.stop()
    return report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.memory", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--big-images", type=int, default=6, help="images per ModerateBatch")
    parser.add_argument("--big-bytes", type=int, default=10_400_000, help="bytes of each batch image")
    parser.add_argument("--pixels", type=int, default=12_000_000, help="pixels of the single photo-sized image")
    parser.add_argument("--settle-s", type=float, default=3.0)
    args = parser.parse_args(argv)
    print(json.dumps(run(args), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
