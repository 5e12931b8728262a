"""Where, when and on which code a benchmark ran, and how much of the machine others used meanwhile.

Numbers measured on a shared 2-core machine mean little if something else ran at the same time, so
the report says so: `CpuAccount` compares the machine's busy CPU time (/proc/stat) with the CPU time
of this process and its reaped children (the mesh's services, the flood), and reports the rest as
`foreign_cpu_share`: the share of the machine's total CPU capacity used by other processes.

Example::

    account = CpuAccount.start()
    ...                                    # run the benchmark, stop the meshes
    account.foreign_cpu_share()            # 0.02 on a quiet machine; None off Linux
"""

from __future__ import annotations

import datetime
import os
import platform
import resource
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import onnxruntime

from services.launcher import ROOT

PROC_STAT = Path("/proc/stat")


def machine_busy_and_total_s() -> tuple[float, float] | None:
    """Busy and total CPU seconds of the whole machine since boot (all cores), or None off Linux."""
    try:
        fields = [int(v) for v in PROC_STAT.read_text().splitlines()[0].split()[1:9]]
    except (OSError, ValueError, IndexError):
        return None
    user, nice, system, idle, iowait, irq, softirq, steal = fields
    tick = float(os.sysconf("SC_CLK_TCK"))
    busy = user + nice + system + irq + softirq + steal
    return busy / tick, (busy + idle + iowait) / tick


def own_cpu_s() -> float:
    """CPU seconds of this process and of its children that have exited and been waited for."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@dataclass(frozen=True)
class CpuAccount:
    """Readings at the start of a run (see the module docstring)."""

    machine: tuple[float, float] | None
    own_s: float
    wall: float

    @classmethod
    def start(cls) -> CpuAccount:
        return cls(machine_busy_and_total_s(), own_cpu_s(), time.monotonic())

    def foreign_cpu_share(self) -> float | None:
        """Share (0..1) of all cores' time used by processes outside this run since `start`."""
        now = machine_busy_and_total_s()
        if self.machine is None or now is None:
            return None
        busy, total = now[0] - self.machine[0], now[1] - self.machine[1]
        foreign = busy - (own_cpu_s() - self.own_s)
        return round(max(0.0, foreign) / total, 3) if total > 0 else None


def code_version() -> dict[str, Any]:
    """The commit measured and the files under services/ and config/ changed since (uncommitted work)."""
    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10).stdout
        except (OSError, subprocess.SubprocessError):
            return ""
    changed = git("status", "--porcelain", "--", "services", "config").splitlines()
    return {"commit": git("rev-parse", "--short", "HEAD").strip() or None, "uncommitted": [line[3:] for line in changed]}


def machine() -> dict[str, Any]:
    """Where, when and on which code the numbers were measured."""
    return {"code": code_version(), "cpus": os.cpu_count(), "platform": platform.platform(),
            "python": platform.python_version(), "grpcio": grpc.__version__, "onnxruntime": onnxruntime.__version__,
            "utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "loadavg_before": [round(v, 2) for v in os.getloadavg()],
            "note": "the load generator runs on the same cores as the mesh"}
