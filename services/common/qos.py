"""QoS classes: the priority tiers tenants are placed in, shared by the router's scheduler and the
eBPF traffic classifier (`ebpf/`). Declared in the tenants file (`qos_classes:`), highest priority
first; each maps to a DSCP value (the router opens one channel per class with `grpc.dscp`) and to a
guaranteed share of a link for the kernel's HTB hierarchy.

Example (`config/tenants.yaml`)::

    qos_classes:
      - {name: realtime, dscp: 46, link_share_percent: 60}
      - {name: standard, dscp: 26, link_share_percent: 30}
      - {name: bulk,     dscp: 10, link_share_percent: 10}
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence


@dataclass(frozen=True)
class QosClass:
    """One class. `priority` is its position in the list (0 = highest)."""

    name: str
    dscp: int
    link_share_percent: int = 0

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise ValueError(f"name must be a simple identifier, got {self.name!r}")
        if not 0 <= self.dscp <= 63:
            raise ValueError(f"dscp must be 0..63 (the DSCP value, not the TOS byte), got {self.dscp}")
        if not 0 <= self.link_share_percent <= 100:
            raise ValueError(f"link_share_percent must be 0..100, got {self.link_share_percent}")


DEFAULT_CLASSES: tuple[QosClass, ...] = (
    QosClass("realtime", 46, 60),   # EF: live chat
    QosClass("standard", 26, 30),   # AF31: posts, comments
    QosClass("bulk", 10, 10),       # AF11: re-scans, backfills
)


def validate_classes(classes: Sequence[QosClass]) -> None:
    """Raise ValueError unless names and DSCP values are unique and shares sum to at most 100."""
    if not classes:
        raise ValueError("qos_classes must list at least one class")
    names = [c.name for c in classes]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"qos_classes: duplicate class name {duplicates[0]!r}")
    dscps = [c.dscp for c in classes]
    if len(set(dscps)) != len(dscps):
        raise ValueError("qos_classes: each class needs its own dscp value")
    total = sum(c.link_share_percent for c in classes)
    if total > 100:
        raise ValueError(f"qos_classes: link_share_percent adds up to {total}, over 100")


def priority_of(classes: Sequence[QosClass], name: str) -> int:
    """0 for the highest-priority class; ValueError for an unknown name."""
    for index, qos in enumerate(classes):
        if qos.name == name:
            return index
    raise ValueError(f"unknown QoS class {name!r}; known: {[c.name for c in classes]}")
