"""Malformed and truncated frames pass the classifier untouched (byte for byte) and are counted as
unclassified, except where the IP header is intact enough to read a DSCP value. (No VLAN case: the
receiving kernel strips or drops tags before a packet socket sees the frame.)"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import time
from pathlib import Path

from ebpf.loader import Attachment, Target
from ebpf.netns_bed import VethBed, in_netns
from ebpf.qos_config import load_plan

SOURCE_MAC = bytes.fromhex("020000000099")   # marks the test's frames among ARP/ND chatter
ETHER = b"\xff" * 6 + SOURCE_MAC


def ipv4_header(tos: int, protocol: int = 6, ihl: int = 5, frag_off: int = 0, total: int = 40) -> bytes:
    return struct.pack("!BBHHHBBH4s4s", 0x40 | ihl, tos, total, 1, frag_off, 64, protocol, 0,
                       bytes([10, 203, 0, 1]), bytes([10, 203, 0, 2]))


# (frame, class the classifier should count it in)
FRAMES = [
    (ETHER + b"\x08\x00", "unclassified"),                                   # IPv4 ethertype, no header
    (ETHER + b"\x08\x00" + ipv4_header(46 << 2)[:12], "unclassified"),     # IPv4 header cut short
    (ETHER + b"\x08\x00" + ipv4_header(46 << 2, ihl=2), "unclassified"),   # IHL below 5
    (ETHER + b"\x86\xdd" + b"\x6b\x80" + b"\x00" * 18, "unclassified"),   # IPv6 header cut short
    (ETHER + b"\x88\xb5" + b"local experimental ethertype", "unclassified"),
    (ETHER + b"\x08\x00" + ipv4_header(46 << 2) + b"\x13\x88" * 3, "realtime"),  # TCP header cut short
    (ETHER + b"\x08\x00" + ipv4_header(10 << 2, frag_off=0x0010) + b"\x00" * 20, "bulk"),  # later fragment
]

RECEIVER = """
import json, socket, sys, time
dev, marker, count = sys.argv[1], bytes.fromhex(sys.argv[2]), int(sys.argv[3])
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
s.bind((dev, 0)); s.settimeout(0.2)
print("ready", flush=True)
frames, deadline = [], time.monotonic() + 10
while len(frames) < count and time.monotonic() < deadline:
    try:
        frame = s.recv(65535)
    except socket.timeout:
        continue
    if frame[6:12] == marker:
        frames.append(frame.hex())
print(json.dumps(frames), flush=True)
"""

SENDER = """
import socket, sys
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((sys.argv[1], 0))
for frame in sys.argv[2:]:
    s.send(bytes.fromhex(frame))
"""


def test_malformed_frames_pass_untouched(bed: VethBed, state_dir: Path, tenants_80_20: Path) -> None:
    attachment = Attachment.attach(Target(bed.left.dev, bed.left.netns, state_dir=state_dir),
                                   load_plan(tenants_80_20, 20_000_000))
    try:
        before = attachment.status()
        receiver = subprocess.Popen(in_netns(bed.right.netns, [sys.executable, "-c", RECEIVER, bed.right.dev,
                                                               SOURCE_MAC.hex(), str(len(FRAMES))]),
                                    stdout=subprocess.PIPE, text=True)
        assert receiver.stdout is not None and receiver.stdout.readline().strip() == "ready"
        subprocess.run(in_netns(bed.left.netns, [sys.executable, "-c", SENDER, bed.left.dev,
                                                 *(f.hex() for f, _ in FRAMES)]), check=True, timeout=20)
        received, _ = receiver.communicate(timeout=20)
        time.sleep(0.2)
        after = attachment.status()
    finally:
        attachment.detach()
    assert json.loads(received) == [frame.hex() for frame, _ in FRAMES]

    def egress_packets(status_name: str) -> int:
        b = {c.name: c.bpf["egress"].packets for c in before.classes}
        a = {c.name: c.bpf["egress"].packets for c in after.classes}
        b["unclassified"], a["unclassified"] = before.unclassified["egress"].packets, after.unclassified["egress"].packets
        return a[status_name] - b[status_name]

    expected = {name: sum(1 for _, c in FRAMES if c == name) for name in ("unclassified", "realtime", "bulk")}
    # Other chatter (IPv6 router solicitations...) may add unclassified packets, never classified ones.
    assert egress_packets("realtime") == expected["realtime"]
    assert egress_packets("bulk") == expected["bulk"]
    assert egress_packets("unclassified") >= expected["unclassified"]
