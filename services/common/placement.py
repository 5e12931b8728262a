"""Where a service's process runs on a shared host: which CPUs, at which CPU priority. Pure, no gRPC.

The mesh mixes two kinds of work with nothing in common: text items (a fraction of a millisecond of
CPU, a 50 ms P99) and images (OCR alone 150-280 ms of CPU each, a 1 s P99). Left to share every core
as equals, an image batch holds a core for a quarter of a second and every text item behind it on
that core waits: the mixed mix's text P99 passed 50 ms at a few requests per second (issue 15). So
each service says, in its config's `placement` block, where it runs:

- `cpus`: the CPUs it may run on, as positions in the list of CPUs the launcher may use (sorted), so
  `[0]` is "the first CPU this mesh has", whatever the machine numbers it; [] = all of them. A
  position the machine does not have is dropped; when none is left the service runs on all CPUs
  (a 1-core laptop still runs the shipped configs).
- `nice`: added to the process's niceness at start (0..19). Image services run niced, so that when
  a text item and an image batch want the same core the text item gets it at once (the kernel's
  fair scheduler weighs nice 10 about 1/10 of nice 0 and lets a waking nice-0 task preempt), while
  images still use every idle cycle of every CPU they may run on.

The launcher applies the block when it starts a child (`services/launcher.py`); in containers the
orchestrator does: `docker-compose.yml` (`cpu_shares`), Kubernetes requests and limits
(docs/deployment.md "CPU placement").

Example::

    placement = Placement(cpus=(1,), nice=10)
    placement.cpu_set([0, 1])       # {1}
    placement.cpu_set([4, 5, 6])    # {5}: positions, not CPU numbers
    placement.cpu_set([0])          # None: the machine has no second CPU, so run anywhere
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Sequence


@dataclass(frozen=True)
class Placement:
    """A service's CPUs (positions among the host's usable CPUs; () = all) and niceness (0..19)."""

    cpus: tuple[int, ...] = ()
    nice: int = 0

    def __post_init__(self) -> None:
        if any(cpu < 0 for cpu in self.cpus):
            raise ValueError(f"cpus are positions among the host's CPUs (0, 1, ...), got {list(self.cpus)}")
        if len(set(self.cpus)) != len(self.cpus):
            raise ValueError(f"cpus lists a CPU twice: {list(self.cpus)}")
        if not 0 <= self.nice <= 19:
            raise ValueError(f"nice must be 0..19 (added to the process's niceness), got {self.nice}")

    def cpu_set(self, usable: Sequence[int]) -> set[int] | None:
        """The CPU numbers to pin to, given the host's usable CPU numbers; None = no pinning (no
        `cpus`, or none of its positions exists on this host)."""
        ordered = sorted(usable)
        chosen = {ordered[position] for position in self.cpus if position < len(ordered)}
        return chosen or None

    def describe(self, usable: Sequence[int]) -> str:
        """'CPUs {1}, nice 10' for a log line."""
        cpus = self.cpu_set(usable)
        where = f"CPUs {sorted(cpus)}" if cpus else "all CPUs"
        return f"{where}, nice {self.nice}"


def usable_cpus() -> list[int]:
    """The CPU numbers this process may run on (its affinity; every CPU where affinity is unknown)."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def placement_command(placement: Placement, usable: Sequence[int]) -> list[str]:
    """The command prefix that starts a child on its CPUs and at its niceness (`taskset`, `nice`: both are
    inherited across exec and by every thread the process starts later); [] for the default placement.

    A prefix rather than Python code run between fork and exec (`preexec_fn`): with other threads in the
    parent (gRPC's, in the launcher and in the tests) a child could abort before exec.

    Example::

        >>> placement_command(Placement(cpus=(1,), nice=10), [0, 1])
        ['taskset', '--cpu-list', '1', 'nice', '-n', '10']
    """
    prefix: list[str] = []
    cpus = placement.cpu_set(usable)
    if cpus:
        prefix += ["taskset", "--cpu-list", ",".join(str(cpu) for cpu in sorted(cpus))]
    if placement.nice:
        prefix += ["nice", "-n", str(placement.nice)]
    return prefix
