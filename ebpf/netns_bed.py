"""A throw-away test bed: two network namespaces joined by a veth pair, and iperf3 flows across it.

Used by `tests/netns/` and `bench/ebpf_qos.py`. Names are unique per bed, every command has a
timeout, and `destroy` (also run by the context manager, on errors too) deletes both namespaces,
which removes the veth pair and every qdisc on it.

Example::

    with VethBed.create() as bed:
        bed.run(bed.left.netns, ["ip", "addr"])
        with iperf3_servers(bed, bed.right, [5201]):
            flows = run_iperf3(bed, bed.left, bed.right, [Flow(5201, tos=46 << 2)], seconds=3)
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

COMMAND_TIMEOUT_S = 20.0


class BedError(RuntimeError):
    """A command of the test bed failed: the message holds its stderr."""


@dataclass(frozen=True)
class Side:
    """One end of the veth pair."""

    netns: str
    dev: str
    ipv4: str
    ipv6: str


@dataclass(frozen=True)
class Flow:
    """One iperf3 client flow: to server `port`, with TOS byte `tos` (DSCP << 2); `reverse` makes the
    server send (iperf3 -R); `streams` parallel connections (iperf3 -P)."""

    port: int
    tos: int = 0
    ipv6: bool = False
    reverse: bool = False
    streams: int = 1


@dataclass(frozen=True)
class FlowResult:
    """Receiver goodput of one flow."""

    flow: Flow
    bits_per_second: float
    bytes: int


def require_tools(*names: str) -> None:
    """BedError naming the first missing program (and the package that provides it)."""
    for name in names:
        if shutil.which(name) is None:
            raise BedError(f"{name} is not installed: `apt-get install {name}` (make system-deps does)")


def run(argv: Sequence[str], timeout: float = COMMAND_TIMEOUT_S) -> str:
    """Run `argv`; its stdout, or BedError with its stderr."""
    try:
        result = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise BedError(f"{' '.join(argv)}: no answer within {timeout:.0f}s") from None
    if result.returncode != 0:
        raise BedError(f"{' '.join(argv)}: exit {result.returncode}: {result.stderr.strip()}")
    return result.stdout


def in_netns(netns: str, argv: Sequence[str]) -> list[str]:
    """`argv` run inside `netns`."""
    return ["ip", "netns", "exec", netns, *argv]


@dataclass(frozen=True)
class VethBed:
    """Namespaces `left.netns` and `right.netns`, joined by veth `left.dev` <-> `right.dev`."""

    tag: str
    left: Side
    right: Side

    @classmethod
    def create(cls, *, gso_max_segs: int | None = 1) -> VethBed:
        """Make a new bed with unique names. `gso_max_segs=1` sends MTU-sized packets (no GSO bursts),
        which makes a shared FIFO share fairly; None keeps the kernel's GSO."""
        require_tools("ip", "tc")
        tag = "am" + secrets.token_hex(3)
        bed = cls(tag, Side(f"{tag}-l", f"{tag}l", "10.203.0.1", "fd00:203::1"),
                  Side(f"{tag}-r", f"{tag}r", "10.203.0.2", "fd00:203::2"))
        try:
            bed._build(gso_max_segs)
        except BaseException:
            bed.destroy()
            raise
        return bed

    def _build(self, gso_max_segs: int | None) -> None:
        for side in (self.left, self.right):
            run(["ip", "netns", "add", side.netns])
        run(["ip", "link", "add", self.left.dev, "netns", self.left.netns, "type", "veth",
             "peer", "name", self.right.dev, "netns", self.right.netns])
        for side in (self.left, self.right):
            ip = ["ip", "-n", side.netns]
            run([*ip, "addr", "add", f"{side.ipv4}/24", "dev", side.dev])
            run([*ip, "-6", "addr", "add", f"{side.ipv6}/64", "dev", side.dev, "nodad"])
            if gso_max_segs is not None:
                run([*ip, "link", "set", side.dev, "gso_max_segs", str(gso_max_segs)])
            run([*ip, "link", "set", side.dev, "up"])
            run([*ip, "link", "set", "lo", "up"])

    def destroy(self) -> None:
        """Delete both namespaces (and with them the veth pair and its qdiscs). Safe to call twice."""
        for side in (self.left, self.right):
            subprocess.run(["ip", "netns", "del", side.netns], capture_output=True, timeout=COMMAND_TIMEOUT_S)

    def exists(self) -> bool:
        """Whether any of the bed's namespaces is still there."""
        listed = run(["ip", "netns", "list"])
        return any(line.split()[0] in (self.left.netns, self.right.netns) for line in listed.splitlines() if line)

    def __enter__(self) -> VethBed:
        return self

    def __exit__(self, *exc: object) -> None:
        self.destroy()


@contextmanager
def iperf3_servers(side: Side, ports: Sequence[int]) -> Iterator[None]:
    """iperf3 servers on `ports` in `side`'s namespace for the duration of the block."""
    require_tools("iperf3")
    processes = [subprocess.Popen(in_netns(side.netns, ["iperf3", "-s", "-p", str(p), "-1"]),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for p in ports]
    try:
        _wait_listening(side, ports)
        yield
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
            process.wait(timeout=COMMAND_TIMEOUT_S)


def _wait_listening(side: Side, ports: Sequence[int], timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        listening = run(in_netns(side.netns, ["ss", "-Htln"]))
        if all(f":{p} " in listening for p in ports):
            return
        time.sleep(0.05)
    raise BedError(f"iperf3 servers on {list(ports)} in {side.netns} did not start listening")


def run_iperf3(client: Side, server: Side, flows: Sequence[Flow], *, seconds: int, omit: int = 1,
               window: str = "", congestion: str = "") -> list[FlowResult]:
    """Run `flows` at the same time from `client` to `server` (servers already listening); goodputs.

    `window` (e.g. "64K") caps each flow's socket buffers, which bounds what it queues: with queues
    longer than all windows together nothing is dropped, so byte counters can be compared exactly.
    `congestion` picks the TCP congestion control (e.g. "cubic"; default: the system's).
    """
    processes = []
    for flow in flows:
        address = server.ipv6 if flow.ipv6 else server.ipv4
        argv = ["iperf3", "-c", address, "-p", str(flow.port), "-t", str(seconds), "-O", str(omit), "-J",
                "-S", str(flow.tos)]
        if window:
            argv += ["-w", window]
        if flow.reverse:
            argv.append("-R")
        if flow.streams > 1:
            argv += ["-P", str(flow.streams)]
        if congestion:
            argv += ["-C", congestion]
        processes.append(subprocess.Popen(in_netns(client.netns, argv), stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True))
    results = []
    for flow, process in zip(flows, processes):
        try:
            out, err = process.communicate(timeout=seconds + omit + COMMAND_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
            raise BedError(f"iperf3 flow to port {flow.port} did not finish") from None
        try:
            report = json.loads(out)
            received = report["end"]["sum_received"]
        except (ValueError, KeyError):
            raise BedError(f"iperf3 flow to port {flow.port} failed: {err.strip() or out[-500:]}") from None
        results.append(FlowResult(flow, float(received["bits_per_second"]), int(received["bytes"])))
    return results


@contextmanager
def modality_service(side: Side, service: str, port: int, *, timeout_s: float = 120.0) -> Iterator[str]:
    """A real auditmesh modality service (`python -m services.<service>.server`) listening on
    `side.ipv4:port` inside `side`'s namespace; yields its address, stops it (SIGTERM) afterwards."""
    root = Path(__file__).resolve().parents[1]
    address = f"{side.ipv4}:{port}"
    # The service needs the internal shared secret (services/common/internal_auth.py). It is set in this
    # process's environment so the probes this bed starts later (bench.grpc_probe) inherit and send it.
    os.environ.setdefault("AUDITMESH_INTERNAL_SECRET", secrets.token_urlsafe(32))
    env = {**os.environ, "AUDITMESH_LISTEN": address, "AUDITMESH_METRICS_LISTEN": "off", "PYTHONUNBUFFERED": "1"}
    argv = [sys.executable, "-m", f"services.{service}.server", "--config", str(root / "config" / f"{service}.yaml"),
            "--log-level", "warning"]
    process = subprocess.Popen(in_netns(side.netns, argv), cwd=root, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + timeout_s
        # The service binds only after loading and warming its models, so listening means serving.
        while f":{port} " not in run(in_netns(side.netns, ["ss", "-Htln"])):
            if process.poll() is not None:
                raise BedError(f"{service} service exited with {process.returncode}: {process.stderr.read()[-2000:]}"
                               if process.stderr else f"{service} service exited with {process.returncode}")
            if time.monotonic() > deadline:
                raise BedError(f"{service} service did not listen on {address} within {timeout_s:.0f}s")
            time.sleep(0.1)
        yield address
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=COMMAND_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if process.stderr:
            process.stderr.close()
