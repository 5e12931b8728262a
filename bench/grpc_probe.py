"""A KServe v2 client that sends small `text_moderation` ModelInfer calls over a gRPC channel marked
with one DSCP value (`("grpc.dscp", N)`, the way the router opens one channel per QoS class), and
prints their latencies as JSON. Run inside a network namespace by `bench/ebpf_qos.py` and
`tests/netns/`::

    ip netns exec NS python -m bench.grpc_probe --target 10.203.0.2:8101 --dscp 46 --seconds 5

Calls go one after another (closed loop) with `--gap-ms` between them, each with `--deadline-s`;
prints {"calls", "errors", "p50_ms", "p90_ms", "p99_ms", "max_ms", "seconds"}.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Sequence

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import tritonclient.grpc as triton

from services.common.internal_auth import ENV_SECRET, SECRET_HEADER

MODEL = "text_moderation"
TEXT = "hey, are you coming to the match tonight? bring snacks"


def nearest_rank(sorted_ms: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile of sorted samples (no interpolation): P99 of 100 samples is the 99th."""
    if not sorted_ms:
        return float("nan")
    return sorted_ms[max(1, math.ceil(fraction * len(sorted_ms))) - 1]


def probe(target: str, dscp: int, seconds: float, gap_s: float, deadline_s: float) -> dict[str, float]:
    """Send calls for `seconds`; latency summary in milliseconds."""
    client = triton.InferenceServerClient(target, channel_args=[("grpc.dscp", dscp)])
    secret = os.environ.get(ENV_SECRET)  # the text port needs the mesh's shared secret (internal_auth)
    headers = {SECRET_HEADER: secret} if secret else None
    tensor = triton.InferInput("TEXT", [1, 1], "BYTES")
    tensor.set_data_from_numpy(np.array([[TEXT.encode()]], dtype=object))
    latencies: list[float] = []
    errors = 0
    began = time.monotonic()
    try:
        while time.monotonic() - began < seconds:
            start = time.perf_counter()
            try:
                client.infer(MODEL, [tensor], client_timeout=deadline_s, headers=headers)
                latencies.append((time.perf_counter() - start) * 1e3)
            except triton.InferenceServerException:
                errors += 1
            time.sleep(gap_s)
    finally:
        client.close()
    ordered = sorted(latencies)
    return {"calls": len(latencies), "errors": errors, "dscp": dscp, "seconds": round(time.monotonic() - began, 2),
            "p50_ms": round(nearest_rank(ordered, 0.50), 2), "p90_ms": round(nearest_rank(ordered, 0.90), 2),
            "p99_ms": round(nearest_rank(ordered, 0.99), 2), "max_ms": round(ordered[-1], 2) if ordered else float("nan")}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.grpc_probe", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", required=True, help="host:port of a text service")
    parser.add_argument("--dscp", type=int, default=0, help="DSCP value 0..63 for the channel (default 0)")
    parser.add_argument("--seconds", type=float, default=5.0, help="how long to send (default 5)")
    parser.add_argument("--gap-ms", type=float, default=10.0, help="pause between calls (default 10)")
    parser.add_argument("--deadline-s", type=float, default=5.0, help="per-call deadline (default 5)")
    args = parser.parse_args(argv)
    if not 0 <= args.dscp <= 63:
        parser.error(f"--dscp must be 0..63, got {args.dscp}")
    print(json.dumps(probe(args.target, args.dscp, args.seconds, args.gap_ms / 1e3, args.deadline_s)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
