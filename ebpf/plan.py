"""From QoS classes to what goes into the kernel: the HTB hierarchy and the classifier's map entries.

Pure code (no bcc, no netlink), so it is unit-tested on its own. Class `i` of the tenants file (0 =
highest priority) becomes slot `i + 1` in the BPF maps (slot 0 means "unclassified") and HTB class
`1:<(i+1)*10 hex>` under the root class `1:1`::

    1:   htb root qdisc, default = the lowest class
    1:1  rate = ceil = the link's total rate
    1:10 realtime  rate = 60 % of total, ceil = total, prio 0      (skb->priority 0x10010)
    1:20 standard  rate = 30 %,              ceil = total, prio 1
    1:30 bulk      rate = 10 %,              ceil = total, prio 2  (default class)

Every class may borrow up to the whole link when others are idle; under contention each gets at least
its share, and spare bandwidth goes to the higher-priority classes first.

Example::

    plan = build_plan(DEFAULT_CLASSES, parse_rate("1gbit"), port_rules=[PortRule(9000, "realtime", "acme")])
    plan.classes[0].handle == 0x10010
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from services.common.qos import QosClass, validate_classes

MAX_CLASSES = 16            # slots in the BPF maps (tenant_tc.c is compiled with this)
HTB_MAJOR = 1
ROOT_QDISC_HANDLE = HTB_MAJOR << 16        # 1:
ROOT_CLASS_HANDLE = (HTB_MAJOR << 16) | 1  # 1:1
MAX_HTB_PRIO = 7            # HTB accepts priorities 0..7
MIN_RATE_BPS = 8_000        # HTB needs a positive rate even for a class with a 0 % share
DEFAULT_LEAF_LIMIT = 100    # packets in each class's pfifo
UNCLASSIFIED = "unclassified"


def class_handle(slot: int) -> int:
    """The full HTB handle of slot `slot` (1-based): 0x10010 for slot 1 ("1:10")."""
    if not 1 <= slot <= MAX_CLASSES:
        raise ValueError(f"slot must be 1..{MAX_CLASSES}, got {slot}")
    return (HTB_MAJOR << 16) | (0x10 * slot)


def format_handle(handle: int) -> str:
    """tc's spelling of a handle: `format_handle(0x10010) == "1:10"`."""
    return f"{handle >> 16:x}:{handle & 0xFFFF:x}"


@dataclass(frozen=True)
class PortRule:
    """TCP port `port` (source or destination) belongs to QoS class `qos_class`; `tenant` labels it."""

    port: int
    qos_class: str
    tenant: str = ""

    def __post_init__(self) -> None:
        if not 1 <= self.port <= 65535:
            raise ValueError(f"port must be 1..65535, got {self.port}")
        if not self.qos_class:
            raise ValueError("qos_class must name a QoS class")

    @property
    def label(self) -> str:
        """What counters and metrics call this rule: the tenant id, else `port:<n>`."""
        return self.tenant or f"port:{self.port}"


@dataclass(frozen=True)
class HtbClass:
    """One leaf class of the HTB hierarchy, for one QoS class."""

    name: str
    slot: int
    dscp: int
    rate_bps: int
    ceil_bps: int
    prio: int

    def __post_init__(self) -> None:
        class_handle(self.slot)  # validates the slot
        if not 0 < self.rate_bps <= self.ceil_bps:
            raise ValueError(f"rate_bps must be in 1..ceil_bps ({self.ceil_bps}), got {self.rate_bps}")
        if not 0 <= self.prio <= MAX_HTB_PRIO:
            raise ValueError(f"prio must be 0..{MAX_HTB_PRIO}, got {self.prio}")

    @property
    def handle(self) -> int:
        """Full HTB handle, the value the classifier writes into skb->priority."""
        return class_handle(self.slot)


@dataclass(frozen=True)
class Plan:
    """Everything attach/update write: HTB classes, DSCP → slot, port → slot."""

    total_bps: int
    classes: tuple[HtbClass, ...]
    port_rules: tuple[PortRule, ...] = ()
    leaf_limit: int = DEFAULT_LEAF_LIMIT

    def __post_init__(self) -> None:
        if self.total_bps <= 0:
            raise ValueError(f"total_bps must be positive, got {self.total_bps}")
        if not 1 <= len(self.classes) <= MAX_CLASSES:
            raise ValueError(f"classes must hold 1..{MAX_CLASSES} classes, got {len(self.classes)}")
        if self.leaf_limit < 1:
            raise ValueError(f"leaf_limit must be >= 1 packet, got {self.leaf_limit}")
        names = {c.name for c in self.classes}
        for rule in self.port_rules:
            if rule.qos_class not in names:
                raise ValueError(f"port_rules: port {rule.port} names unknown QoS class {rule.qos_class!r}; "
                                 f"known: {sorted(names)}")
        ports = [r.port for r in self.port_rules]
        if len(set(ports)) != len(ports):
            raise ValueError(f"port_rules: a port appears twice in {sorted(ports)}")

    @property
    def default_class(self) -> HtbClass:
        """The lowest-priority class: where HTB puts anything the classifier leaves alone."""
        return self.classes[-1]

    def slot_of(self, name: str) -> int:
        """The slot of QoS class `name`; ValueError for an unknown one."""
        for htb_class in self.classes:
            if htb_class.name == name:
                return htb_class.slot
        raise ValueError(f"unknown QoS class {name!r}; known: {[c.name for c in self.classes]}")

    def slot_names(self) -> dict[int, str]:
        """Slot → class name, with slot 0 as `unclassified`."""
        return {0: UNCLASSIFIED, **{c.slot: c.name for c in self.classes}}

    def dscp_slots(self) -> dict[int, int]:
        """DSCP value → slot, for the classifier's `dscp_class` map."""
        return {c.dscp: c.slot for c in self.classes}

    def port_slots(self) -> dict[int, int]:
        """TCP port → slot, for the classifier's `port_class` map."""
        return {r.port: self.slot_of(r.qos_class) for r in self.port_rules}


def build_plan(classes: Sequence[QosClass], total_bps: int, *, port_rules: Sequence[PortRule] = (),
               leaf_limit: int = DEFAULT_LEAF_LIMIT) -> Plan:
    """The plan for QoS classes `classes` (highest priority first) on a link of `total_bps`.

    Each class is guaranteed `link_share_percent` of the link (at least MIN_RATE_BPS) and may borrow up
    to all of it; priorities follow the order of the classes (capped at HTB's 7).
    """
    validate_classes(classes)
    if len(classes) > MAX_CLASSES:
        raise ValueError(f"qos_classes: at most {MAX_CLASSES} classes, got {len(classes)}")
    if total_bps <= 0:
        raise ValueError(f"total_bps must be positive, got {total_bps}")
    floor = min(total_bps, max(MIN_RATE_BPS, total_bps // 1000))
    htb = tuple(HtbClass(name=q.name, slot=i + 1, dscp=q.dscp, prio=min(i, MAX_HTB_PRIO), ceil_bps=total_bps,
                         rate_bps=max(floor, total_bps * q.link_share_percent // 100))
                for i, q in enumerate(classes))
    return Plan(total_bps=total_bps, classes=htb, port_rules=tuple(port_rules), leaf_limit=leaf_limit)


def tenant_port_rules(tenant_ports: Mapping[str, int], tenant_classes: Mapping[str, str]) -> tuple[PortRule, ...]:
    """A rule per tenant with a dedicated port, in that tenant's QoS class; ValueError for an unknown tenant."""
    rules = []
    for tenant, port in sorted(tenant_ports.items()):
        if tenant not in tenant_classes:
            raise ValueError(f"tenant_ports: unknown tenant {tenant!r}; known: {sorted(tenant_classes)}")
        rules.append(PortRule(port, tenant_classes[tenant], tenant))
    return tuple(rules)


def plan_to_dict(plan: Plan) -> dict[str, Any]:
    """A JSON-ready form of `plan` (what the loader's state file keeps)."""
    return {"total_bps": plan.total_bps, "leaf_limit": plan.leaf_limit,
            "classes": [vars(c) for c in plan.classes],
            "port_rules": [vars(r) for r in plan.port_rules]}


def plan_from_dict(data: Mapping[str, Any]) -> Plan:
    """The inverse of `plan_to_dict`."""
    return Plan(total_bps=int(data["total_bps"]), leaf_limit=int(data["leaf_limit"]),
                classes=tuple(HtbClass(**c) for c in data["classes"]),
                port_rules=tuple(PortRule(**r) for r in data["port_rules"]))
