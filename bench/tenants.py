"""Benchmark tenants: an id, a QoS class, a share of the traffic, and a key made up for the run.

The tenants file written for the mesh holds only `id`, `api_key_sha256`, `policies` and `qos_class`,
so every other per-tenant setting (quota, weight, in-flight cap, deadlines) is the router's default:
the benchmark measures the shipped behaviour, not a tuned tenant.

Example::

    >>> print(tenants_yaml([BenchTenant("chat", "realtime")]), end="")  # doctest: +ELLIPSIS
    tenants:
      - id: chat
        api_key_sha256: ...
        policies: [default]
        qos_class: realtime
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from services.common.qos import DEFAULT_CLASSES
from services.router.tenants import hash_key

#: The shipped QoS classes' names (the benchmark's tenants use the router's default classes).
QOS_CLASSES = tuple(c.name for c in DEFAULT_CLASSES)


@dataclass(frozen=True)
class BenchTenant:
    """One tenant of the benchmark. `share` weighs how much of a mix's traffic it sends."""

    id: str
    qos_class: str
    share: float = 1.0

    def __post_init__(self) -> None:
        if self.qos_class not in QOS_CLASSES:
            raise ValueError(f"qos_class must be one of {QOS_CLASSES}, got {self.qos_class!r}")
        if self.share <= 0:
            raise ValueError(f"share must be > 0, got {self.share}")

    @property
    def key(self) -> str:
        """The API key the benchmark uses for this tenant (loopback only)."""
        return f"bench-{self.id}-key"


def tenants_yaml(tenants: Sequence[BenchTenant]) -> str:
    """The tenants file for `tenants`, every one allowed the `default` policy."""
    lines = ["tenants:"]
    for tenant in tenants:
        lines += [f"  - id: {tenant.id}", f"    api_key_sha256: {hash_key(tenant.key)}",
                  "    policies: [default]", f"    qos_class: {tenant.qos_class}"]
    return "\n".join(lines) + "\n"
