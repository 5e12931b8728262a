"""The realtime tenant's gRPC latency through a bandwidth-limited link while bulk traffic floods it,
without and with the eBPF classifier, in one run. Prints JSON. Needs root, bcc and iperf3 (like
tests/netns); run from the repository root::

    python -m bench.ebpf_qos --rate 10mbit --seconds 10

Set-up: two network namespaces joined by veth; the real text service in one, clients in the other.
Both ends get the same HTB hierarchy (`config/tenants.yaml`: realtime 60 %, standard 30 %, bulk 10 %,
of `--rate`), so both directions are limited. Bulk floods both ways (iperf3 with DSCP 10, and -R),
while `bench.grpc_probe` sends small ModelInfer calls on a channel with DSCP 46 (realtime).
"without": HTB only, nothing classifies, all traffic shares the default class's queue. "with": the
classifier on both ends (requests by DSCP, answers by their learnt connection).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Sequence

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ebpf import tc
from ebpf.loader import Attachment, Target
from ebpf.netns_bed import Flow, FlowResult, VethBed, in_netns, iperf3_servers, modality_service, run_iperf3
from ebpf.plan import Plan
from ebpf.qos_config import load_plan
from ebpf.units import format_rate, parse_rate

ROOT = Path(__file__).resolve().parents[1]
TEXT_PORT = 8101
FLOOD_PORTS = (5201, 5202)
REALTIME_DSCP, BULK_DSCP = 46, 10
RAMP_S = 1.0
FLOOD_STREAMS = 8           # connections per direction: TCP small queues lets each keep only ~2 packets
                            # in a local qdisc, so a bulk tenant fills the queue with many connections
FLOOD_CONGESTION = "cubic"  # loss-based, Linux's usual default: fills queues (BBR would keep them short)


def _flood(bed: VethBed, seconds: int, results: list[FlowResult]) -> None:
    flows = [Flow(FLOOD_PORTS[0], BULK_DSCP << 2, streams=FLOOD_STREAMS),
             Flow(FLOOD_PORTS[1], BULK_DSCP << 2, reverse=True, streams=FLOOD_STREAMS)]
    results.extend(run_iperf3(bed.left, bed.right, flows, seconds=seconds, omit=0, congestion=FLOOD_CONGESTION))


def _probe(bed: VethBed, address: str, seconds: float, gap_ms: float) -> dict[str, Any]:
    argv = [sys.executable, "-m", "bench.grpc_probe", "--target", address, "--dscp", str(REALTIME_DSCP),
            "--seconds", str(seconds), "--gap-ms", str(gap_ms)]
    result = subprocess.run(in_netns(bed.left.netns, argv), capture_output=True, text=True, timeout=seconds + 60,
                            cwd=ROOT)
    if result.returncode != 0:
        raise RuntimeError(f"probe failed: {result.stderr[-2000:]}")
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def measure(bed: VethBed, address: str, seconds: int, gap_ms: float) -> dict[str, Any]:
    """Probe latency while both floods run; flood goodputs in Mbit/s."""
    flood: list[FlowResult] = []
    with iperf3_servers(bed.right, FLOOD_PORTS):
        thread = threading.Thread(target=_flood, args=(bed, seconds + 2, flood), daemon=True)
        thread.start()
        time.sleep(RAMP_S)
        report = _probe(bed, address, seconds, gap_ms)
        thread.join(timeout=seconds + 60)
    report["flood_mbit"] = {"to_service": round(flood[0].bits_per_second / 1e6, 2),
                            "from_service": round(flood[1].bits_per_second / 1e6, 2)} if len(flood) == 2 else None
    return report


def _htb_only(bed: VethBed, plan: Plan, stack: ExitStack) -> None:
    for side in (bed.left, bed.right):
        with tc.open_netlink(side.netns) as ipr:
            tc.add_htb(ipr, tc.interface_index(ipr, side.dev, side.netns), plan)


def _remove_htb(bed: VethBed) -> None:
    for side in (bed.left, bed.right):
        with tc.open_netlink(side.netns) as ipr:
            tc.remove(ipr, tc.interface_index(ipr, side.dev, side.netns), clsact=False, root=True)


def run_bench(rate_bps: int, seconds: int, gap_ms: float, tenants: Path, state_dir: Path) -> dict[str, Any]:
    """Both runs on one bed; the JSON-ready result."""
    plan = load_plan(tenants, rate_bps)
    with VethBed.create() as bed, modality_service(bed.right, "text", TEXT_PORT) as address:
        with ExitStack() as stack:
            _htb_only(bed, plan, stack)
            try:
                without = measure(bed, address, seconds, gap_ms)
            finally:
                _remove_htb(bed)
        attachments = [Attachment.attach(Target(s.dev, s.netns, state_dir=state_dir), plan) for s in (bed.left, bed.right)]
        try:
            with_program = measure(bed, address, seconds, gap_ms)
            counters = {side: {c.name: {"bytes": c.bpf["egress"].bytes, "htb_drops": c.htb.drops if c.htb else None}
                               for c in a.status().classes}
                        for side, a in zip(("client", "service"), attachments)}
        finally:
            for attachment in attachments:
                attachment.detach()
    return {"rate": format_rate(rate_bps), "seconds": seconds, "classes": {c.name: format_rate(c.rate_bps) for c in plan.classes},
            "without_program": without, "with_program": with_program, "egress_by_class": counters,
            "p99_ratio": round(without["p99_ms"] / with_program["p99_ms"], 1),
            "p50_ratio": round(without["p50_ms"] / with_program["p50_ms"], 1)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ebpf_qos", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=parse_rate, default=parse_rate("10mbit"), help="link rate (default 10mbit)")
    parser.add_argument("--seconds", type=int, default=10, help="probe time per run (default 10)")
    parser.add_argument("--gap-ms", type=float, default=10.0, help="pause between realtime calls (default 10)")
    parser.add_argument("--tenants", type=Path, default=ROOT / "config" / "tenants.yaml")
    parser.add_argument("--state-dir", type=Path, default=Path("/run/auditmesh/ebpf-bench"))
    args = parser.parse_args(argv)
    print(json.dumps(run_bench(args.rate, args.seconds, args.gap_ms, args.tenants, args.state_dir), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
