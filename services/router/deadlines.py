"""How long the router gives one request: a pure function of the tenant, the router's defaults, the
budget the request asks for (streams) and the time left on the gRPC call.

Example::

    >>> from services.router.config import Deadlines
    >>> from services.router.tenants import TenantDeadlines
    >>> budget_s(TenantDeadlines(), Deadlines(default_ms=500, max_ms=2000), requested_ms=0, remaining_s=None)
    0.5
"""

from __future__ import annotations

from services.router.config import Deadlines
from services.router.tenants import TenantDeadlines

__all__ = ["budget_s"]


def budget_s(tenant: TenantDeadlines, router: Deadlines, *, requested_ms: int, remaining_s: float | None) -> float:
    """Seconds for one request: the request's own budget (stream messages), else the tenant's or the
    router's default; capped by the tenant's or router's maximum and by the call's gRPC deadline."""
    default_ms = tenant.default_ms or router.default_ms
    max_ms = tenant.max_ms or router.max_ms
    if requested_ms:
        budget = min(requested_ms, max_ms) / 1000.0
        return budget if remaining_s is None else min(budget, remaining_s)
    if remaining_s is not None:
        return min(remaining_s, max_ms / 1000.0)
    return min(default_ms, max_ms) / 1000.0
