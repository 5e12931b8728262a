"""Reads the QoS classes and each tenant's class from the tenants file the router uses, and turns them
into a `Plan` for one link.

Example::

    plan = load_plan(Path("config/tenants.yaml"), parse_rate("1gbit"), tenant_ports={"acme": 9000})
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from ebpf.plan import DEFAULT_LEAF_LIMIT, Plan, PortRule, build_plan, tenant_port_rules
from services.common.config import ConfigError, load_dataclass, read_yaml
from services.common.qos import QosClass
from services.router.tenants import TenantsFile


@dataclass(frozen=True)
class QosConfig:
    """The QoS classes (highest priority first) and tenant id → class name."""

    classes: tuple[QosClass, ...]
    tenant_classes: Mapping[str, str]


def load_qos_config(path: Path) -> QosConfig:
    """Parse `path` (same schema and checks as the router); ConfigError naming the file and key."""
    source = str(path)
    parsed = load_dataclass(TenantsFile, read_yaml(path), source)
    names = {c.name for c in parsed.qos_classes}
    for index, tenant in enumerate(parsed.tenants):
        if tenant.qos_class not in names:
            raise ConfigError(source, f"tenants[{index}].qos_class",
                              f"unknown QoS class {tenant.qos_class!r}; known: {sorted(names)}")
    return QosConfig(parsed.qos_classes, {t.id: t.qos_class for t in parsed.tenants})


def load_plan(path: Path, total_bps: int, *, port_rules: Sequence[PortRule] = (),
              tenant_ports: Mapping[str, int] | None = None, leaf_limit: int = DEFAULT_LEAF_LIMIT) -> Plan:
    """The plan for the tenants file `path` on a link of `total_bps`, with extra port rules."""
    config = load_qos_config(path)
    rules = (*port_rules, *tenant_port_rules(tenant_ports or {}, config.tenant_classes))
    return build_plan(config.classes, total_bps, port_rules=rules, leaf_limit=leaf_limit)
