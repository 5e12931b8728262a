"""What the request path reads: one immutable `Snapshot` of the live configuration (tenants, the active
policy version per tenant, running canaries), swapped atomically as a whole.

A request takes `runtime.snapshot` once and calls `select` on it; everything it then uses (the
tenant's settings, the compiled policy with its prebuilt Aho-Corasick automaton, the canary arm) comes
from that one object, so a request sees exactly one version from start to end, however many swaps
happen meanwhile. Snapshots are built off the request path (`build`, in a worker thread): compiling
a policy version happens once per version (cached by version id and content hash), and the swap is
a single attribute assignment.

Which version answers an item of tenant T under policy P:
1. T's own pointer for P if it has one, else the global pointer for P (the baseline);
2. if a canary runs for (P, T) — or for (P, all tenants) when T has no pointer of its own — and the
   item's stable hash falls in the canary's percent: the candidate answers, or, in shadow mode, the
   baseline answers and the candidate is evaluated beside it (`Selection.shadow`).

Example::

    selection = runtime.snapshot.select(tenant, requested_policy, item_id)
    outcome = await pipeline.run(item, selection.policy, ..., shadow=selection.shadow)
    runtime.observe(selection, item_id, decision=..., actions=..., shadow=...)  # canary counters
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Callable, Mapping

from services.router.control.canary import CANARY_CLOCK, Arm, CanaryMonitor, in_canary
from services.router.policy import CompiledPolicy
from services.router.control.versions import compile_stored_policy
from services.router.control.store import CanarySpec, StoredVersion
from services.router.tenants import Tenant, TenantDirectory

log = logging.getLogger(__name__)
#: Compiled policy versions kept (each holds its automaton).
COMPILE_CACHE_SIZE = 256


@dataclass(frozen=True)
class Canary:
    """A running canary with both versions compiled, and its (mutable, shared) monitor."""

    spec: CanarySpec
    candidate: CompiledPolicy
    monitor: CanaryMonitor

    @property
    def key(self) -> tuple[str, str]:
        return self.spec.policy, self.spec.scope


@dataclass(frozen=True)
class Selection:
    """The versions one item is judged under (see the module docstring)."""

    tenant: Tenant
    policy: CompiledPolicy
    shadow: CompiledPolicy | None = None
    canary: Canary | None = None
    arm: Arm | None = None

    @property
    def canary_arm(self) -> str:
        """"baseline" / "candidate" while a canary runs for this item's policy and scope, else ""."""
        return self.arm or ""


@dataclass(frozen=True)
class Snapshot:
    """The live configuration at one generation. Immutable; replaced as a whole."""

    generation: int
    tenants: TenantDirectory
    tenants_version: str
    #: Global pointers: policy name → active version.
    policies: Mapping[str, CompiledPolicy]
    #: Tenant pointers: (policy name, tenant id) → that tenant's own active version.
    overrides: Mapping[tuple[str, str], CompiledPolicy] = field(default_factory=dict)
    #: Running canaries by (policy name, scope).
    canaries: Mapping[tuple[str, str], Canary] = field(default_factory=dict)

    def select(self, tenant: Tenant, requested: str, item_key: str) -> Selection:
        """The versions for one item of `tenant` (its settings re-read from this snapshot).

        Raises PermissionDeniedError for a policy the tenant is not given. `item_key` (the item id)
        fixes the canary arm; an empty key takes a random arm."""
        tenant = self.tenants.tenants.get(tenant.id, tenant)
        name = tenant.resolve_policy(requested)
        own = self.overrides.get((name, tenant.id))
        baseline = own if own is not None else self.policies[name]
        canary = self.canaries.get((name, tenant.id)) or (None if own is not None else self.canaries.get((name, "")))
        if canary is None or canary.monitor.rolled_back:  # rolled back: off at once, whatever the store says yet
            return Selection(tenant, baseline)
        chosen = in_canary(f"{name}:{item_key or uuid.uuid4().hex}", canary.spec.percent)
        if canary.spec.shadow:
            return Selection(tenant, baseline, canary.candidate if chosen else None, canary, "candidate" if chosen else None)
        return Selection(tenant, canary.candidate if chosen else baseline, None, canary, "candidate" if chosen else "baseline")

    def policy_versions(self) -> dict[str, str]:
        """Policy name → its globally active version (tenant pointers and canaries aside)."""
        return {name: policy.version for name, policy in self.policies.items()}

    def effective(self, name: str, tenant_id: str) -> CompiledPolicy | None:
        """The version tenant `tenant_id` ("" = the global one) gets for policy `name`, canaries aside."""
        return self.overrides.get((name, tenant_id)) or self.policies.get(name)

    def without_canary(self, key: tuple[str, str]) -> Snapshot:
        """This snapshot with one canary removed (an automatic rollback takes effect at once)."""
        return dataclasses.replace(self, canaries={k: c for k, c in self.canaries.items() if k != key})


class PolicyRuntime:
    """Holds the current snapshot, compiles versions (cached) and keeps the canary monitors.

    `snapshot` may be read from any thread; `swap`, `observe` and `report` belong to the event loop
    thread, `compile` and `build_snapshot` may run in a worker thread.
    """

    def __init__(self, snapshot: Snapshot, *, clock: Callable[[], float] = CANARY_CLOCK) -> None:
        self.snapshot = snapshot
        self._clock = clock
        self._compiled: OrderedDict[tuple[str, str, str], CompiledPolicy] = OrderedDict()
        self._monitors: dict[tuple[str, str, str, float], CanaryMonitor] = {}
        self._swap_listeners: list[Callable[[Snapshot, Snapshot], None]] = []
        #: A swap and a read-modify-swap (a canary taken out by `judge`) never interleave: a reload swapped
        #: in from another thread is never overwritten by a copy of the snapshot before it.
        self._swap_lock = threading.RLock()

    def swap(self, snapshot: Snapshot) -> None:
        """Make `snapshot` live. Requests already running keep the one they took. Then each listener
        (`on_swap`) gets (old, new), in the thread that swapped; one that raises is logged and skipped."""
        with self._swap_lock:
            old, self.snapshot = self.snapshot, snapshot
        for listener in self._swap_listeners:
            try:
                listener(old, snapshot)
            except Exception:
                log.exception("snapshot swap listener failed")

    def on_swap(self, listener: Callable[[Snapshot, Snapshot], None]) -> None:
        """Call `listener(old, new)` after every swap (e.g. to drop what belonged to removed tenants)."""
        self._swap_listeners.append(listener)

    def compile(self, version: StoredVersion) -> CompiledPolicy:
        """The compiled form of a stored policy version (compiled once, then cached)."""
        key = (version.name, version.version, version.content_hash)
        compiled = self._compiled.get(key)
        if compiled is None:
            compiled = compile_stored_policy(version.content, f"policy/{version.name}@{version.version}")
            self._compiled[key] = compiled
            while len(self._compiled) > COMPILE_CACHE_SIZE:
                self._compiled.popitem(last=False)
        else:
            self._compiled.move_to_end(key)
        return compiled

    def remember(self, version: StoredVersion, compiled: CompiledPolicy) -> None:
        """Cache a version compiled elsewhere (at validation), so activating it compiles nothing."""
        self._compiled[(version.name, version.version, version.content_hash)] = compiled

    def canary(self, spec: CanarySpec, candidate: CompiledPolicy) -> Canary:
        """A running canary; its monitor survives snapshot rebuilds (same spec → same counters)."""
        key = (spec.policy, spec.scope, spec.candidate, spec.started_at)
        monitor = self._monitors.get(key)
        if monitor is None:
            monitor = self._monitors[key] = CanaryMonitor(spec.bounds)
        return Canary(spec, candidate, monitor)

    def monitor(self, spec: CanarySpec) -> CanaryMonitor | None:
        """The monitor of a canary (running or stopped) this process has seen."""
        return self._monitors.get((spec.policy, spec.scope, spec.candidate, spec.started_at))

    def observe(self, selection: Selection, item_id: str, *, decision: str | None, actions: Mapping[str, str],
                shadow: tuple[str, Mapping[str, str]] | None = None) -> str | None:
        """Count one item for its canary (no-op without one). `decision` None = the item failed.
        Returns the reason to roll the candidate back, when the bounds are now exceeded."""
        canary = selection.canary
        if canary is None or selection.arm is None:
            return None
        now = self._clock()
        monitor = canary.monitor
        if canary.spec.shadow:
            monitor.record("baseline", blocked=decision == "block", error=decision is None, now=now)
            shadow_decision = shadow[0] if shadow is not None else None
            monitor.record("candidate", blocked=shadow_decision == "block", error=shadow_decision is None, now=now)
            if shadow is not None and decision is not None:
                monitor.record_shadow(item_id, actions, shadow[1], (decision, shadow[0]))
        else:
            monitor.record(selection.arm, blocked=decision == "block", error=decision is None, now=now)
        return self.judge(canary, now)

    def judge(self, canary: Canary, now: float | None = None) -> str | None:
        """Take the canary out of the live snapshot when its bounds are exceeded (judged on the fleet's
        counts when fresh: services/router/canary_fleet.py). Returns the reason once, when that happens."""
        monitor = canary.monitor
        reason = monitor.breach(self._clock() if now is None else now)
        if reason is not None and not monitor.rolled_back:
            monitor.rolled_back = reason
            with self._swap_lock:
                self.swap(self.snapshot.without_canary(canary.key))
            log.warning("canary of %s@%s (scope %s) rolled back automatically: %s", canary.spec.policy,
                        canary.spec.candidate, canary.spec.scope or "all tenants", reason)
            return reason
        return None
