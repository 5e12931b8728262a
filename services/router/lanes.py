"""Ingress lanes: one router process per group of QoS classes, each on its own port.

A single Python process cannot keep a realtime tenant's latency while a bulk tenant floods it on the
same port: the flood's calls queue inside gRPC before any of our code (admission, priorities) sees
them, and the realtime calls wait in that same first-come queue (measured: docs/benchmarks.md,
"Isolation"). So the router can be split into lanes. Each lane is its own process
(`python -m services.router --lane NAME`), listening on its own port and serving only the
tenants of its classes; all lanes share the policy store (they are replicas of one configuration)
and the modality services. A flood in the bulk lane then costs the bulk lane's process, which runs
at a lower CPU priority (`nice`), and cannot delay the intake of the interactive lane.

`config/router.yaml`::

    lanes:   # optional; without it one process serves every class on server.listen
      - {name: interactive, classes: [realtime, standard], listen: 127.0.0.1:8100, metrics_listen: 127.0.0.1:9100}
      - {name: bulk, classes: [bulk], listen: 127.0.0.1:8104, metrics_listen: 127.0.0.1:9104, nice: 10}

A tenant calling a lane that does not serve its class gets PERMISSION_DENIED naming its lane (and the
lane's `advertise` address when set).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Sequence

from services.common.errors import PermissionDeniedError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Lane:
    """One router process: its name, the QoS classes it serves, where it listens, its CPU niceness."""

    name: str
    classes: tuple[str, ...]
    listen: str
    metrics_listen: str = ""
    #: Added to the process's niceness at start (0..19): a bulk lane yields the CPU to the others.
    nice: int = 0
    #: Calls in progress at once in this lane's process (0 = server.max_concurrent_rpcs): beyond it gRPC
    #: answers RESOURCE_EXHAUSTED at once, before any Python runs, so a flooded lane rejects in
    #: milliseconds instead of queueing calls until their deadline.
    max_concurrent_rpcs: int = 0
    #: Calls gRPC may hold before this lane's Python picks them up (0 = server.max_pending_calls):
    #: past it gRPC refuses new calls with CANCELLED at once, in C (ServerConfig.max_pending_calls).
    max_pending_calls: int = 0
    #: The address clients use for this lane (e.g. a load balancer's), named to a tenant that called
    #: the wrong lane; "" = name the lane only (`listen` is often not what clients see).
    advertise: str = ""

    def __post_init__(self) -> None:
        if not self.name.replace("-", "").replace("_", "").isalnum():
            raise ValueError(f"name must be letters, digits, '-' and '_', got {self.name!r}")
        if not self.classes:
            raise ValueError("classes must list at least one QoS class")
        if self.max_concurrent_rpcs < 0:
            raise ValueError(f"max_concurrent_rpcs must be >= 0 (0 = server.max_concurrent_rpcs), got {self.max_concurrent_rpcs}")
        if self.max_pending_calls < 0 or self.max_pending_calls == 1:
            raise ValueError(f"max_pending_calls must be 0 (server.max_pending_calls) or >= 2, got {self.max_pending_calls}")
        if not 0 <= self.nice <= 19:
            raise ValueError(f"nice must be 0..19 (added to the process's niceness), got {self.nice}")
        host, sep, port = self.listen.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ValueError(f"listen must be host:port, got {self.listen!r}")

    @property
    def port(self) -> str:
        return self.listen.rpartition(":")[2]

    def describe(self) -> str:
        return f"lane {self.name!r}" + (f" at {self.advertise}" if self.advertise else "")


def validate_lanes(lanes: Sequence[Lane]) -> None:
    """Raise ValueError unless lane names, ports and classes are each used once."""
    for attribute in ("name", "listen"):
        values = [getattr(lane, attribute) for lane in lanes]
        duplicates = sorted({v for v in values if values.count(v) > 1})
        if duplicates:
            raise ValueError(f"two lanes have {attribute} {duplicates[0]!r}")
    classes = [c for lane in lanes for c in lane.classes]
    duplicates = sorted({c for c in classes if classes.count(c) > 1})
    if duplicates:
        raise ValueError(f"QoS class {duplicates[0]!r} is in two lanes; each class belongs to one lane")


def pick_lane(lanes: Sequence[Lane], name: str | None) -> Lane | None:
    """The lane called `name` (the first lane when `name` is None; None when no lanes are configured).
    Raises ValueError for an unknown name."""
    if not lanes:
        if name:
            raise ValueError(f"--lane {name!r}: the config defines no lanes")
        return None
    if name is None:
        return lanes[0]
    for lane in lanes:
        if lane.name == name:
            return lane
    raise ValueError(f"--lane {name!r}: unknown lane; the config defines {[lane.name for lane in lanes]}")


def check_classes_covered(lanes: Sequence[Lane], known_classes: Sequence[str]) -> None:
    """Raise ValueError if a lane names a class the tenants file does not define, or a defined class
    has no lane (its tenants could not be served anywhere)."""
    if not lanes:
        return
    served = {c for lane in lanes for c in lane.classes}
    unknown = sorted(served - set(known_classes))
    if unknown:
        raise ValueError(f"lanes name QoS class {unknown[0]!r}, which the tenants file does not define "
                         f"(classes: {list(known_classes)})")
    orphaned = [c for c in known_classes if c not in served]
    if orphaned:
        raise ValueError(f"QoS class {orphaned[0]!r} is in no lane: add it to a lane's classes")


class LaneGate:
    """Per request: does this process's lane serve the tenant's class? (No lanes: every class.)"""

    def __init__(self, lane: Lane | None, lanes: Sequence[Lane] = ()) -> None:
        self.lane = lane
        self._classes = frozenset(lane.classes) if lane is not None else None
        self._lane_of = {c: other for other in lanes for c in other.classes}

    def check(self, tenant_id: str, qos_class: str) -> None:
        """PermissionDeniedError when the tenant's class belongs to another lane."""
        if self._classes is None or qos_class in self._classes:
            return
        assert self.lane is not None  # _classes is set only with a lane; narrows the type
        home = self._lane_of.get(qos_class)
        where = home.describe() if home is not None else "no lane (ask the operator)"
        raise PermissionDeniedError(f"tenant {tenant_id!r} is in QoS class {qos_class!r}, which is served by {where}; "
                                    f"this is lane {self.lane.name!r} (classes {', '.join(self.lane.classes)})")


def log_service_name(lane: Lane) -> str:
    """What a lane's process calls itself in its log lines: "router-<lane>", so that the lanes' lines,
    which a log pipeline collects together, say which process wrote them."""
    return f"router-{lane.name}"


def apply_nice(lane: Lane | None) -> None:
    """Lower this process's CPU priority by the lane's `nice` (once, at start)."""
    if lane is not None and lane.nice:
        new = os.nice(lane.nice)
        log.info("lane %s: CPU niceness now %d", lane.name, new)
