"""A bulk tenant's flood, in its own process, for the isolation scenario. Prints JSON.

    python -m bench.flood --address 127.0.0.1:8100 --key KEY --rate 5000 --duration 10 [--deadline-ms 2000]

Sends text items open loop (Poisson) with the tenant's key. It runs in a separate process so that
its event loop does not delay the realtime tenant's sends in the parent (both still share the
machine's cores with the mesh). The first line on stdout is `ready` (sent when the schedule starts);
the JSON summary follows when every call has answered: what was sent and at what rate, status counts,
latency of the answers, and the rejection latency: time from sending to a RESOURCE_EXHAUSTED,
DEADLINE_EXCEEDED, UNAVAILABLE or CANCELLED answer (`REJECTION_CODES`), and latency by status.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections import Counter
from typing import Any, Mapping, Sequence

import grpc

from bench.loadgen import Outcome, poisson_arrivals, run_open_loop
from bench.payloads import TEXTS, BenchInputs
from bench.router_target import CHANNEL_OPTIONS, RouterSender
from bench.stats import status_counts, summarize_ms

#: Answers that refuse the call. CANCELLED counts: this generator never cancels a call itself, so a
#: CANCELLED answer is the server's gRPC refusing it (its pending-call backlog limit, see
#: ServerConfig.max_pending_calls).
REJECTION_CODES = frozenset({"RESOURCE_EXHAUSTED", "DEADLINE_EXCEEDED", "UNAVAILABLE", "CANCELLED"})
TENANT = "flood"


def flood_report(rate_rps: float, outcomes: Sequence[Outcome], error_details: Mapping[str, int] | None = None) -> dict[str, Any]:
    """Summary of a flood (see the module docstring); `sent_rps` is what the generator managed to send."""
    sends = sorted(o.sent for o in outcomes)
    span = sends[-1] - sends[0] if len(sends) > 1 else 0.0
    rejected = [o for o in outcomes if o.code in REJECTION_CODES]
    return {"offered_rps": rate_rps, "sent": len(outcomes), "sent_rps": round(len(sends) / span, 1) if span else None,
            "status": status_counts(o.code for o in outcomes),
            "ok_latency_ms": summarize_ms(o.service_s for o in outcomes if o.ok),
            "rejection_latency_ms": summarize_ms(o.service_s for o in rejected),
            "rejection_latency_from_schedule_ms": summarize_ms(o.latency_s for o in rejected),
            "latency_by_status_ms": {code: summarize_ms(o.service_s for o in outcomes if o.code == code)
                                     for code in sorted({o.code for o in outcomes})},
            "generator_lag_ms": summarize_ms(o.lag_s for o in outcomes),
            "error_details": dict(Counter(error_details or {}).most_common())}


async def flood(address: str, key: str, rate_rps: float, duration_s: float, deadline_s: float, seed: int) -> dict[str, Any]:
    """Run the flood and return `flood_report`."""
    inputs = BenchInputs(tuple(text.encode("utf-8") for text in TEXTS), ())  # no images: skip rendering
    arrivals = poisson_arrivals(rate_rps, duration_s, kinds={"text": 1.0}, tenants={TENANT: 1.0}, seed=seed)
    async with grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS) as channel:
        send = RouterSender(channel, inputs, keys={TENANT: key}, deadlines_s={"text": deadline_s})
        await channel.channel_ready()
        print("ready", flush=True)
        outcomes = await run_open_loop(send, arrivals)
    return flood_report(rate_rps, outcomes, send.error_details)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--address", required=True, help="router host:port")
    parser.add_argument("--key", required=True, help="the bulk tenant's API key")
    parser.add_argument("--rate", type=float, required=True, help="offered requests/s")
    parser.add_argument("--duration", type=float, required=True, help="seconds")
    parser.add_argument("--deadline-ms", type=float, default=2000.0)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    report = asyncio.run(flood(args.address, args.key, args.rate, args.duration, args.deadline_ms / 1000, args.seed))
    json.dump(report, sys.stdout)
    print(flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
