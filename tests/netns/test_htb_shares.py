"""Real TCP traffic from two QoS classes at once through a 20 Mbit HTB link (80/20 split): with the
classifier the high class keeps its guaranteed share; without it both flows split the link about
evenly. The classifier's byte counters must equal HTB's own class counters."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from ebpf import tc
from ebpf.loader import Attachment, Status, Target
from ebpf.netns_bed import Flow, FlowResult, VethBed, iperf3_servers, run_iperf3
from ebpf.plan import Plan, PortRule
from ebpf.qos_config import load_plan

# Slow (iperf3 runs of seconds each in network namespaces): `make test` and `make test-slow` run it, `make test-fast` skips it.
# Serial: it measures bandwidth shares, which other tests' load would skew (`make test` runs it after the rest, alone).
pytestmark = [pytest.mark.slow, pytest.mark.serial]

RATE_BPS = 20_000_000
SECONDS = 4
WINDOW = "64K"          # two windows (~90 packets) fit in one 100-packet leaf queue: nothing is dropped
REALTIME_DSCP, BULK_DSCP = 46, 10
REALTIME_PORT, BULK_PORT = 5301, 5302
MAX_FRAME = 1514


def shares(results: list[FlowResult]) -> list[float]:
    total = sum(r.bits_per_second for r in results)
    return [r.bits_per_second / total for r in results]


#: Control packets that may reach the default class between HTB creation and filter attach.
ATTACH_WINDOW_PACKETS = 2
CONTROL_PACKET_MAX_BYTES = 128


def quiet_status(attachment: Attachment) -> Status:
    """Status once the queues are empty and the counters have stopped moving."""
    previous = None
    for _ in range(40):
        status = attachment.status()
        idle = all(c.htb is not None and c.htb.backlog_packets == 0 for c in status.classes)
        if idle and status == previous:
            return status
        previous = status
        time.sleep(0.1)
    raise AssertionError("HTB queues did not drain")


def assert_counters_match_htb(status: Status) -> None:
    """Per class: packets the classifier saw on egress = packets HTB sent + dropped (nothing left
    queued); bytes equal up to the dropped frames. Unclassified packets go to HTB's default class."""
    for index, htb_class in enumerate(status.classes):
        assert htb_class.htb is not None
        seen = htb_class.bpf["egress"]
        # Regression (CI, one run in three): the HTB root exists a moment before the filter is attached,
        # so a kernel control packet (IPv6 neighbour discovery, 86 bytes) sent in that window reaches
        # the default class without passing the classifier. Allow that, and only that, there.
        early_packets, early_bytes = 0, 0
        if index == len(status.classes) - 1:  # the default class also carries what was left unclassified
            seen = type(seen)(seen.packets + status.unclassified["egress"].packets,
                              seen.bytes + status.unclassified["egress"].bytes)
            early_packets = max(0, htb_class.htb.packets + htb_class.htb.drops - seen.packets)
            assert early_packets <= ATTACH_WINDOW_PACKETS, (htb_class.name, seen, htb_class.htb)
            early_bytes = early_packets * CONTROL_PACKET_MAX_BYTES
        assert seen.packets + early_packets == htb_class.htb.packets + htb_class.htb.drops, (htb_class.name, seen,
                                                                                             htb_class.htb)
        assert -early_bytes <= seen.bytes - htb_class.htb.bytes <= htb_class.htb.drops * MAX_FRAME, (
            htb_class.name, seen, htb_class.htb)


def run_two_flows(bed: VethBed, high: Flow, low: Flow) -> list[FlowResult]:
    with iperf3_servers(bed.right, [high.port, low.port]):
        return run_iperf3(bed.left, bed.right, [high, low], seconds=SECONDS, window=WINDOW)


def test_without_classifier_the_flows_split_evenly(bed: VethBed, tenants_80_20: Path) -> None:
    plan = load_plan(tenants_80_20, RATE_BPS)
    with tc.open_netlink(bed.left.netns) as ipr:  # the same HTB hierarchy, but nothing sets skb->priority
        tc.add_htb(ipr, tc.interface_index(ipr, bed.left.dev, bed.left.netns), plan)
    results = run_two_flows(bed, Flow(5201, REALTIME_DSCP << 2), Flow(5202, BULK_DSCP << 2))
    high, low = shares(results)
    print(f"no classifier: {[round(r.bits_per_second / 1e6, 2) for r in results]} Mbit/s, shares {high:.2f}/{low:.2f}")
    assert 0.35 <= high <= 0.65, f"without the classifier the split should be about even, got {high:.2f}/{low:.2f}"
    assert sum(r.bits_per_second for r in results) >= 0.6 * RATE_BPS  # the link was used (loose: CPU-bound on a busy 2-core box)


@pytest.mark.parametrize("marking, ipv6", [("dscp", False), ("dscp", True), ("port", False)])
def test_classifier_keeps_high_class_share(bed: VethBed, tenants_80_20: Path, state_dir: Path,
                                           marking: str, ipv6: bool) -> None:
    rules = [PortRule(REALTIME_PORT, "realtime"), PortRule(BULK_PORT, "bulk", "globex")]
    plan: Plan = load_plan(tenants_80_20, RATE_BPS, port_rules=rules)
    if marking == "dscp":
        high, low = Flow(5201, REALTIME_DSCP << 2, ipv6), Flow(5202, BULK_DSCP << 2, ipv6)
    else:  # unmarked packets, told apart by their destination port only
        high, low = Flow(REALTIME_PORT, 0, ipv6), Flow(BULK_PORT, 0, ipv6)
    attachment = Attachment.attach(Target(bed.left.dev, bed.left.netns, state_dir=state_dir), plan)
    try:
        results = run_two_flows(bed, high, low)
        status = quiet_status(attachment)
    finally:
        attachment.detach()
    high_share, low_share = shares(results)
    realtime, bulk = status.classes
    print(f"{marking} ipv6={ipv6}: {[round(r.bits_per_second / 1e6, 2) for r in results]} Mbit/s, "
          f"shares {high_share:.2f}/{low_share:.2f}; realtime {realtime.bpf['egress']} htb {realtime.htb}; "
          f"bulk {bulk.bpf['egress']} htb {bulk.htb}")
    assert high_share >= 0.70, f"realtime should keep ~80 % of the link, got {high_share:.2f}"
    assert low_share >= 0.12, f"bulk should keep its guaranteed ~20 %, got {low_share:.2f}"
    assert sum(r.bits_per_second for r in results) >= 0.6 * RATE_BPS  # the link was used (loose: CPU-bound on a busy 2-core box)
    # Each flow's data went through its class: at least the bytes iperf3 delivered (plus headers).
    assert realtime.bpf["egress"].bytes >= results[0].bytes
    assert bulk.bpf["egress"].bytes >= results[1].bytes
    assert realtime.htb is not None and realtime.htb.bytes >= results[0].bytes
    assert_counters_match_htb(status)
    # The receiver's ACKs come back unmarked: the learnt connection puts them in the same class.
    assert realtime.bpf["ingress"].packets > 0 and bulk.bpf["ingress"].packets > 0
    if marking == "port":
        by_label = {p.label: p for p in status.ports}
        assert by_label["globex"].bpf["egress"].bytes == bulk.bpf["egress"].bytes
        assert by_label[f"port:{REALTIME_PORT}"].bpf["egress"].bytes == realtime.bpf["egress"].bytes
