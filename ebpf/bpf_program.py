"""The classifier program (`tenant_tc.c`) compiled by bcc, with typed access to its pinned maps.

The maps are pinned under a bpffs folder, so a later process (`status`, `update`, `detach`) compiles
the same source and gets the same maps back: counters survive the loader process, and `update`
rewrites the class maps of a running program without reloading it.

Example::

    program = TenantProgram.load(Path("/sys/fs/bpf/auditmesh/-/eth0"))
    program.write_plan(plan)
    program.class_counters()   # {(slot, "egress"): Counter(packets=.., bytes=..), ...}
"""

from __future__ import annotations

import ctypes as ct
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from ebpf.kernel_headers import ensure_kernel_headers
from ebpf.plan import MAX_CLASSES, Plan

SOURCE = Path(__file__).with_name("tenant_tc.c")
DIRECTIONS = ("egress", "ingress")   # index = the direction number in tenant_tc.c
SLOTS = MAX_CLASSES + 1
DSCP_VALUES = 64
MAP_NAMES = ("dscp_class", "port_class", "class_handle", "flow_class", "class_stats", "port_stats")
BCC_HINT = ("install Debian's python3-bpfcc and libbpfcc (`make system-deps`) and make the venv see them "
            "(`make bcc-venv`); PyPI's `bcc` is an unrelated package")


class EbpfSetupError(RuntimeError):
    """bcc, kernel headers, privileges or bpffs are missing: the message says what to do."""


@dataclass(frozen=True)
class Counter:
    """Packets (GSO segments counted one by one, as HTB does) and bytes on the wire."""

    packets: int = 0
    bytes: int = 0


def import_bcc() -> ModuleType:
    """Debian's `bcc` module, or EbpfSetupError explaining how to install it."""
    try:
        import bcc
    except ImportError as error:
        raise EbpfSetupError(f"cannot import bcc ({error}): {BCC_HINT}") from None
    if not hasattr(bcc, "BPF"):
        raise EbpfSetupError(f"the `bcc` module at {getattr(bcc, '__file__', '?')} is not the BPF compiler "
                             f"collection: {BCC_HINT}")
    module: ModuleType = bcc
    return module


def require_privileges() -> None:
    """EbpfSetupError unless this process may load BPF programs and change qdiscs."""
    if os.geteuid() == 0:
        return
    raise EbpfSetupError("loading a TC program needs root, or CAP_BPF + CAP_NET_ADMIN + CAP_PERFMON "
                         "(plus CAP_SYS_ADMIN to enter another network namespace); run as root")


def ensure_bpffs(root: Path) -> None:
    """Mount a bpf filesystem at `root` unless one is there already (pinned maps live in it)."""
    if root.is_dir() and _fs_type(root) == "bpf_fs":
        return
    root.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(["mount", "-t", "bpf", "bpf", str(root)], capture_output=True, text=True, timeout=10)
    if result.returncode != 0:
        raise EbpfSetupError(f"{root} is not a bpf filesystem and mounting one failed: {result.stderr.strip()}")


def _fs_type(path: Path) -> str:
    result = subprocess.run(["stat", "-f", "-c", "%T", str(path)], capture_output=True, text=True, timeout=10)
    return result.stdout.strip()


class TenantProgram:
    """The compiled program and its maps. `load` compiles; the kernel objects outlive this object."""

    def __init__(self, bpf: Any, pin_dir: Path) -> None:
        self._bpf = bpf
        self.pin_dir = pin_dir

    @classmethod
    def load(cls, pin_dir: Path) -> TenantProgram:
        """Compile and load the program, creating (or reusing) the maps pinned in `pin_dir`."""
        bcc = import_bcc()
        require_privileges()
        ensure_kernel_headers()
        pin_dir.mkdir(parents=True, exist_ok=True)
        cflags = [f'-DPIN_DIR="{pin_dir}"', f"-DMAX_CLASSES={MAX_CLASSES}"]
        try:
            bpf = bcc.BPF(text=SOURCE.read_bytes(), cflags=cflags)
        except Exception as error:  # bcc raises bare Exception for compile and verifier failures
            raise EbpfSetupError(f"bcc could not compile or load {SOURCE.name}: {error}") from error
        return cls(bpf, pin_dir)

    def function_fd(self, direction: str) -> tuple[int, str]:
        """(fd, name) of the program for `direction` ("egress" or "ingress")."""
        name = f"tc_{direction}"
        function = self._bpf.load_func(name.encode(), self._bpf.SCHED_CLS)
        return int(function.fd), name

    def close(self) -> None:
        """Release this process's file descriptors (attached filters and pinned maps stay)."""
        self._bpf.cleanup()

    def write_plan(self, plan: Plan) -> None:
        """Point DSCP values, ports and slots at `plan`'s classes; forget learnt connections."""
        dscp, handles, ports = self._bpf[b"dscp_class"], self._bpf[b"class_handle"], self._bpf[b"port_class"]
        wanted = plan.dscp_slots()
        for value in range(DSCP_VALUES):
            dscp[ct.c_uint(value)] = ct.c_uint(wanted.get(value, 0))
        by_slot = {c.slot: c.handle for c in plan.classes}
        for slot in range(SLOTS):
            handles[ct.c_uint(slot)] = ct.c_uint(by_slot.get(slot, 0))
        port_slots = plan.port_slots()
        for key in [k.value for k in ports.keys()]:
            if key not in port_slots:
                del ports[ct.c_ushort(key)]
        for port, slot in port_slots.items():
            ports[ct.c_ushort(port)] = ct.c_uint(slot)
        self._bpf[b"flow_class"].clear()

    def class_counters(self) -> dict[tuple[int, str], Counter]:
        """(slot, direction) → counter, summed over CPUs."""
        stats = self._bpf[b"class_stats"]
        result = {}
        for number, direction in enumerate(DIRECTIONS):
            for slot in range(SLOTS):
                per_cpu = stats.getvalue(ct.c_uint(number * SLOTS + slot))
                result[(slot, direction)] = Counter(sum(c.packets for c in per_cpu), sum(c.bytes for c in per_cpu))
        return result

    def port_counters(self) -> dict[tuple[int, str], Counter]:
        """(port, direction) → counter for packets classified by a port rule, summed over CPUs."""
        stats = self._bpf[b"port_stats"]
        result = {}
        for key in stats.keys():
            per_cpu = stats.getvalue(key)
            result[(int(key.port), DIRECTIONS[key.direction])] = Counter(sum(c.packets for c in per_cpu),
                                                                         sum(c.bytes for c in per_cpu))
        return result

    def learnt_flows(self) -> int:
        """How many connections the program currently classifies from their other direction."""
        return sum(1 for _ in self._bpf[b"flow_class"].keys())


def unpin(pin_dir: Path) -> None:
    """Remove the pinned maps in `pin_dir` (the kernel frees them once nothing else holds them)."""
    for name in MAP_NAMES:
        (pin_dir / name).unlink(missing_ok=True)
    for folder in (pin_dir, pin_dir.parent):
        try:
            folder.rmdir()
        except OSError:
            break
