"""Real gRPC: the auditmesh text service in one namespace, a KServe client in the other whose channel
carries `("grpc.dscp", N)` (as the router's per-class channels do). With the classifier on both ends,
the requests (marked) and the answers (unmarked: put in the class of their connection) land in the
QoS class of the DSCP, on both hosts and both directions, and HTB's class counters agree."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from ebpf.loader import Attachment, Status, Target
from ebpf.netns_bed import VethBed, in_netns, modality_service
from ebpf.qos_config import load_plan
from services.launcher import ROOT

TEXT_PORT = 8101
CALL_SECONDS = 1.5


def probe(bed: VethBed, address: str, dscp: int) -> dict[str, float]:
    argv = [sys.executable, "-m", "bench.grpc_probe", "--target", address, "--dscp", str(dscp),
            "--seconds", str(CALL_SECONDS), "--gap-ms", "5"]
    result = subprocess.run(in_netns(bed.left.netns, argv), capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-2000:]
    report: dict[str, float] = json.loads(result.stdout)
    assert report["calls"] >= 20 and report["errors"] == 0, report
    return report


def packets(status: Status) -> dict[tuple[str, str], int]:
    found = {(c.name, d): c.bpf[d].packets for c in status.classes for d in ("egress", "ingress")}
    return found


def delta(after: Status, before: Status) -> dict[tuple[str, str], int]:
    old = packets(before)
    return {key: value - old[key] for key, value in packets(after).items()}


def counters(status: Status) -> tuple[object, ...]:
    """Every counter one status read: BPF per class and direction, unclassified, HTB per class."""
    return (tuple((c.bpf["egress"], c.bpf["ingress"], c.htb) for c in status.classes),
            status.unclassified["egress"], status.unclassified["ingress"])


def quiet_status(attachment: Attachment, tries: int = 50) -> Status:
    """A status read while no packet is moving, so BPF and HTB counters are read at the same point.

    One read takes the BPF counters, then HTB's: a packet between the two makes HTB run ahead. Two
    reads in a row with every counter equal (BPF and HTB) mean nothing moved from the first BPF read to
    the second HTB read, so the second is consistent. Regressions: the connection's last packets (after
    the service stopped) passed between the two halves of one read; comparing only HTB, with the last
    read taken whatever it held once the tries ran out, let that through on a loaded CI machine."""
    previous = attachment.status()
    for _ in range(tries):
        time.sleep(0.2)
        current = attachment.status()
        if counters(current) == counters(previous):
            return current
        previous = current
    raise AssertionError(f"{attachment.target.dev}: counters still moving after {tries * 0.2:.0f} s: "
                         f"{counters(previous)}")


def test_grpc_calls_are_counted_in_their_dscp_class_both_ways(bed: VethBed, state_dir: Path) -> None:
    plan = load_plan(ROOT / "config" / "tenants.yaml", 100_000_000)  # realtime 46, standard 26, bulk 10
    client = Attachment.attach(Target(bed.left.dev, bed.left.netns, state_dir=state_dir), plan)
    try:
        server = Attachment.attach(Target(bed.right.dev, bed.right.netns, state_dir=state_dir), plan)
        try:
            with modality_service(bed.right, "text", TEXT_PORT) as address:
                for dscp, expected in ((46, "realtime"), (10, "bulk")):
                    before = (client.status(), server.status())
                    report = probe(bed, address, dscp)
                    after = (client.status(), server.status())
                    calls = int(report["calls"])
                    on_client, on_server = delta(after[0], before[0]), delta(after[1], before[1])
                    print(f"dscp {dscp}: {calls} calls, client {on_client}, server {on_server}")
                    # requests: client egress (marked) -> server ingress; answers: server egress -> client ingress
                    for moved in (on_client, on_server):
                        for direction in ("egress", "ingress"):
                            assert moved[(expected, direction)] >= calls, (expected, direction, moved)
                            others = [moved[(c.name, direction)] for c in plan.classes if c.name != expected]
                            assert others == [0] * len(others), (direction, moved)
            for attachment in (client, server):
                status = quiet_status(attachment)
                assert status.learnt_flows >= 1
                for htb_class in status.classes:  # no drops at 100 Mbit: the counters agree exactly
                    assert htb_class.htb is not None and htb_class.htb.drops == 0
                    expected_bytes = htb_class.bpf["egress"].bytes
                    if htb_class.name == plan.default_class.name:
                        expected_bytes += status.unclassified["egress"].bytes
                    assert htb_class.htb.bytes == expected_bytes, (
                        f"{attachment.target.dev} {htb_class.name}: HTB {htb_class.htb.packets} packets "
                        f"{htb_class.htb.bytes} bytes; BPF egress {htb_class.bpf['egress']}, "
                        f"unclassified egress {status.unclassified['egress']}")
                assert status.unclassified["egress"].packets < 50  # ARP/ND and the like, not the gRPC calls
        finally:
            server.detach()
    finally:
        client.detach()
