"""Where the CPU goes during a load step: CPU time of each mesh process and of the load generator.

Reads utime + stime of each process from /proc/<pid>/stat before and after a step. Per process the
step report gets the cores it kept busy (`cores`: CPU seconds / wall seconds, 1.0 = one core flat
out) and the CPU milliseconds it spent per request: on a 2-core machine this says which process is
the bottleneck (e.g. the router at 1.0 core) and what one request costs in each.

Example::

    cpu = ProcessCpu({"router": 1234, "generator": os.getpid()})
    before = cpu.snapshot()
    ...                                           # run a step of 800 requests over 4 s
    ProcessCpu.usage(before, cpu.snapshot(), wall_s=4.0, requests=800)
    # {"router": {"cores": 0.93, "cpu_ms_per_request": 4.65}, "generator": {...}}
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

_TICK_S = 1.0 / float(os.sysconf("SC_CLK_TCK")) if hasattr(os, "sysconf") else 0.01


def process_cpu_s(pid: int) -> float | None:
    """utime + stime of `pid` in seconds, or None if it is gone (or not on Linux)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()  # the command name may contain spaces
    return (int(fields[11]) + int(fields[12])) * _TICK_S  # fields 14 and 15 of proc(5)


class ProcessCpu:
    """CPU time of named processes (see the module docstring)."""

    def __init__(self, pids: Mapping[str, int]) -> None:
        self._pids = dict(pids)

    @property
    def pids(self) -> dict[str, int]:
        return dict(self._pids)

    def snapshot(self) -> dict[str, float]:
        """CPU seconds so far per name (processes that are gone are left out)."""
        readings = {name: process_cpu_s(pid) for name, pid in self._pids.items()}
        return {name: value for name, value in readings.items() if value is not None}

    @staticmethod
    def usage(before: Mapping[str, float], after: Mapping[str, float], *, wall_s: float,
              requests: int) -> dict[str, dict[str, float | None]]:
        """Cores kept busy and CPU ms per request, per process, between two snapshots.

        Example::

            >>> ProcessCpu.usage({"router": 1.0}, {"router": 4.0}, wall_s=4.0, requests=600)
            {'router': {'cores': 0.75, 'cpu_ms_per_request': 5.0}}
        """
        result: dict[str, dict[str, float | None]] = {}
        for name in after:
            if name in before:
                spent = after[name] - before[name]
                result[name] = {"cores": round(spent / wall_s, 3) if wall_s > 0 else None,
                                "cpu_ms_per_request": round(spent * 1000 / requests, 3) if requests else None}
        return result
