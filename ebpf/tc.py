"""Netlink (pyroute2) operations on one interface: qdisc snapshots, the clsact qdisc with the
classifier's filters, the HTB hierarchy of a `Plan`, and HTB class counters.

All functions take an open `IPRoute` (see `open_netlink`) and the interface index.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator

from pyroute2 import IPRoute
from pyroute2.netlink.exceptions import NetlinkError

from ebpf.plan import ROOT_CLASS_HANDLE, ROOT_QDISC_HANDLE, HtbClass, Plan
from ebpf.units import format_rate

TC_H_ROOT = 0xFFFFFFFF
EGRESS_PARENT = 0xFFFFFFF3    # ffff:fff3
INGRESS_PARENT = 0xFFFFFFF2   # ffff:fff2
FILTER_PRIO = 1


class InterfaceError(RuntimeError):
    """The interface or namespace is missing, or holds qdiscs that attach must not replace."""


@dataclass(frozen=True)
class QdiscInfo:
    """One qdisc as `tc qdisc show` lists it."""

    kind: str
    handle: int
    parent: int

    def describe(self) -> str:
        """`htb 1: parent 0xffffffff`."""
        return f"{self.kind} {self.handle >> 16:x}: parent {self.parent:#x}"


@dataclass(frozen=True)
class ClassStats:
    """Counters of one HTB class: what it sent, and what its leaf queue dropped or still holds."""

    handle: int
    bytes: int
    packets: int
    drops: int
    backlog_packets: int


@contextmanager
def open_netlink(netns: str | None) -> Iterator[IPRoute]:
    """An rtnetlink socket in network namespace `netns` (None = this process's namespace)."""
    try:
        # flags=0: pyroute2 would otherwise create a missing namespace (O_CREAT by default)
        ipr = IPRoute(netns=netns, flags=0) if netns else IPRoute()
    except (OSError, NetlinkError) as error:
        raise InterfaceError(f"cannot open network namespace {netns!r}: {error}") from None
    try:
        yield ipr
    finally:
        ipr.close()


def interface_index(ipr: IPRoute, dev: str, netns: str | None) -> int:
    """The index of `dev`, or InterfaceError naming it and the namespace."""
    found = ipr.link_lookup(ifname=dev)
    if not found:
        where = f"network namespace {netns}" if netns else "this network namespace"
        raise InterfaceError(f"no interface {dev!r} in {where}")
    return int(found[0])


def snapshot(ipr: IPRoute, index: int) -> tuple[QdiscInfo, ...]:
    """The interface's qdiscs, in a stable order (what detach compares against)."""
    found = [QdiscInfo(str(q.get_attr("TCA_KIND")), int(q["handle"]), int(q["parent"]))
             for q in ipr.get_qdiscs(index)]
    return tuple(sorted(found, key=lambda q: (q.parent, q.handle, q.kind)))


def check_replaceable(qdiscs: tuple[QdiscInfo, ...], dev: str) -> None:
    """InterfaceError if `dev` has a clsact/ingress qdisc or a root qdisc someone configured.

    Kernel-made default qdiscs have handle 0 (noqueue, pfifo_fast, mq, fq_codel...): deleting the HTB
    root brings them back, so detach restores the interface. Anything else would be lost.
    """
    for qdisc in qdiscs:
        if qdisc.kind in ("clsact", "ingress"):
            raise InterfaceError(f"{dev} already has a {qdisc.kind} qdisc (another program's filters); "
                                 "refusing to attach over it")
        if qdisc.parent == TC_H_ROOT and qdisc.handle != 0:
            raise InterfaceError(f"{dev} already has a configured root qdisc ({qdisc.describe()}); refusing to "
                                 "replace it, since detach could not restore it")


def add_classifier(ipr: IPRoute, index: int, egress: tuple[int, str], ingress: tuple[int, str]) -> None:
    """Add the clsact qdisc and the program's direct-action filters on egress and ingress."""
    ipr.tc("add", "clsact", index)
    for (fd, name), parent in ((egress, EGRESS_PARENT), (ingress, INGRESS_PARENT)):
        ipr.tc("add-filter", "bpf", index, ":1", fd=fd, name=name, parent=parent, classid=1,
               direct_action=True, prio=FILTER_PRIO)


def _class_args(htb_class: HtbClass) -> dict[str, Any]:
    return {"parent": ROOT_CLASS_HANDLE, "rate": format_rate(htb_class.rate_bps),
            "ceil": format_rate(htb_class.ceil_bps), "prio": htb_class.prio}


def _leaf_handle(htb_class: HtbClass) -> int:
    return (0x10 * htb_class.slot) << 16   # 10:, 20:, ... under 1:10, 1:20, ...


def add_htb(ipr: IPRoute, index: int, plan: Plan) -> None:
    """The root HTB qdisc (1:), the link class 1:1 and a leaf class with a pfifo per QoS class."""
    default_minor = plan.default_class.handle & 0xFFFF
    ipr.tc("add", "htb", index, ROOT_QDISC_HANDLE, parent=TC_H_ROOT, default=default_minor)
    total = format_rate(plan.total_bps)
    ipr.tc("add-class", "htb", index, ROOT_CLASS_HANDLE, parent=ROOT_QDISC_HANDLE, rate=total, ceil=total)
    for htb_class in plan.classes:
        _add_leaf(ipr, index, htb_class, plan.leaf_limit)


def _add_leaf(ipr: IPRoute, index: int, htb_class: HtbClass, limit: int) -> None:
    ipr.tc("add-class", "htb", index, htb_class.handle, **_class_args(htb_class))
    ipr.tc("add", "pfifo", index, _leaf_handle(htb_class), parent=htb_class.handle, limit=limit)


def change_htb(ipr: IPRoute, index: int, old: Plan, new: Plan) -> None:
    """Move the HTB hierarchy from `old` to `new` in place: change rates, add and remove classes."""
    total = format_rate(new.total_bps)
    ipr.tc("change-class", "htb", index, ROOT_CLASS_HANDLE, parent=ROOT_QDISC_HANDLE, rate=total, ceil=total)
    old_slots = {c.slot for c in old.classes}
    new_slots = {c.slot for c in new.classes}
    for htb_class in new.classes:
        if htb_class.slot in old_slots:
            ipr.tc("change-class", "htb", index, htb_class.handle, **_class_args(htb_class))
        else:
            _add_leaf(ipr, index, htb_class, new.leaf_limit)
    if new.default_class.slot != old.default_class.slot:
        ipr.tc("change", "htb", index, ROOT_QDISC_HANDLE, parent=TC_H_ROOT,
               default=new.default_class.handle & 0xFFFF)
    for htb_class in old.classes:
        if htb_class.slot not in new_slots:
            ipr.tc("del-class", "htb", index, htb_class.handle, parent=ROOT_CLASS_HANDLE)


def remove(ipr: IPRoute, index: int, *, clsact: bool, root: bool) -> list[str]:
    """Delete the clsact qdisc and/or the root HTB qdisc; returns what could not be deleted."""
    problems = []
    if clsact:
        try:
            ipr.tc("del", "clsact", index)
        except NetlinkError as error:
            problems.append(f"clsact: {error}")
    if root:
        try:
            ipr.tc("del", "htb", index, ROOT_QDISC_HANDLE, parent=TC_H_ROOT)
        except NetlinkError as error:
            problems.append(f"htb root: {error}")
    return problems


def class_stats(ipr: IPRoute, index: int) -> dict[int, ClassStats]:
    """HTB class handle → its counters (what `tc -s class show` prints)."""
    result = {}
    for message in ipr.get_classes(index):
        if message.get_attr("TCA_KIND") != "htb":
            continue
        stats = message.get_attr("TCA_STATS2")
        basic = stats.get_attr("TCA_STATS_BASIC") if stats else None
        queue = stats.get_attr("TCA_STATS_QUEUE") if stats else None
        handle = int(message["handle"])
        result[handle] = ClassStats(handle, int(basic["bytes"]) if basic else 0, int(basic["packets"]) if basic else 0,
                                    int(queue["drops"]) if queue else 0, int(queue["qlen"]) if queue else 0)
    return result
