"""Attach, inspect, update and detach the tenant classifier on one interface.

`Attachment.attach(target, plan)` loads `tenant_tc.c` (bcc), writes the plan into its maps, adds the
HTB hierarchy as the root qdisc and the program as clsact filters on egress and ingress, and records
what it added in a state file. Any error (or SIGTERM, which the CLI turns into SystemExit) during
attach removes what was added so far. `Attachment.open(target)` finds an attachment again from another
process; `detach()` deletes exactly the clsact and HTB root qdiscs it added, so the kernel's default
qdisc comes back, unpins the maps, and checks the qdiscs match the ones recorded before attach.

Example::

    target = Target("veth0", netns="blue")
    attachment = Attachment.attach(target, load_plan(Path("config/tenants.yaml"), parse_rate("1gbit")))
    try:
        print(attachment.status().classes)
    finally:
        attachment.detach()
"""

from __future__ import annotations

import json
import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ebpf import tc
from ebpf.bpf_program import DIRECTIONS, Counter, TenantProgram, ensure_bpffs, require_privileges, unpin
from ebpf.plan import Plan, format_handle, plan_from_dict, plan_to_dict

log = logging.getLogger(__name__)

DEFAULT_BPFFS = Path("/sys/fs/bpf")
DEFAULT_STATE_DIR = Path("/run/auditmesh/ebpf")
_NAME = re.compile(r"^[A-Za-z0-9_.@:-]{1,64}$")


class AttachError(RuntimeError):
    """Attach, update or detach could not do what was asked (the message says why)."""


@dataclass(frozen=True)
class Target:
    """An interface (in a network namespace, or this process's when `netns` is None)."""

    dev: str
    netns: str | None = None
    bpffs: Path = DEFAULT_BPFFS
    state_dir: Path = DEFAULT_STATE_DIR

    def __post_init__(self) -> None:
        if not _NAME.match(self.dev) or len(self.dev) > 15:
            raise ValueError(f"dev must be an interface name (up to 15 letters, digits, _.@:-), got {self.dev!r}")
        if self.netns is not None and (not _NAME.match(self.netns) or self.netns.startswith(".")):
            raise ValueError(f"netns must be a network namespace name, got {self.netns!r}")

    @property
    def pin_dir(self) -> Path:
        """Where the program's maps are pinned."""
        return self.bpffs / "auditmesh" / (self.netns or "-") / self.dev

    @property
    def state_path(self) -> Path:
        """Where attach records what it added."""
        return self.state_dir / (self.netns or "-") / f"{self.dev}.json"

    def describe(self) -> str:
        """`veth0 (netns blue)`, for messages."""
        return f"{self.dev} (netns {self.netns})" if self.netns else self.dev


@dataclass(frozen=True)
class State:
    """What attach added, and the qdiscs before it (detach restores and checks them)."""

    plan: Plan
    original: tuple[tc.QdiscInfo, ...]
    added_root: bool = False
    added_clsact: bool = False

    def to_json(self) -> str:
        """The state file's content."""
        return json.dumps({"plan": plan_to_dict(self.plan), "original": [vars(q) for q in self.original],
                           "added_root": self.added_root, "added_clsact": self.added_clsact}, indent=1)

    @classmethod
    def from_json(cls, text: str) -> State:
        """The inverse of `to_json`."""
        data = json.loads(text)
        return cls(plan_from_dict(data["plan"]), tuple(tc.QdiscInfo(**q) for q in data["original"]),
                   bool(data["added_root"]), bool(data["added_clsact"]))


@dataclass(frozen=True)
class ClassStatus:
    """One QoS class: its HTB settings, the program's counters and HTB's own counters."""

    name: str
    handle: str
    rate_bps: int
    ceil_bps: int
    prio: int
    dscp: int
    bpf: dict[str, Counter]
    htb: tc.ClassStats | None


@dataclass(frozen=True)
class PortStatus:
    """Traffic the program classified by one port rule, per direction."""

    port: int
    label: str
    qos_class: str
    bpf: dict[str, Counter]


@dataclass(frozen=True)
class Status:
    """What `status` reports."""

    target: Target
    total_bps: int
    default_class: str
    classes: tuple[ClassStatus, ...]
    unclassified: dict[str, Counter]
    ports: tuple[PortStatus, ...]
    learnt_flows: int
    qdiscs: tuple[tc.QdiscInfo, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (`status --json`)."""
        def counters(by_direction: dict[str, Counter]) -> dict[str, dict[str, int]]:
            return {d: vars(c) for d, c in by_direction.items()}
        return {"dev": self.target.dev, "netns": self.target.netns, "total_bps": self.total_bps,
                "default_class": self.default_class, "learnt_flows": self.learnt_flows,
                "classes": [{**{k: v for k, v in vars(c).items() if k not in ("bpf", "htb")},
                             "bpf": counters(c.bpf), "htb": vars(c.htb) if c.htb else None} for c in self.classes],
                "unclassified": counters(self.unclassified),
                "ports": [{"port": p.port, "label": p.label, "qos_class": p.qos_class, "bpf": counters(p.bpf)}
                          for p in self.ports],
                "qdiscs": [q.describe() for q in self.qdiscs]}


class Attachment:
    """The classifier and HTB hierarchy on one interface. Build with `attach` or `open`."""

    def __init__(self, target: Target, program: TenantProgram, state: State) -> None:
        self.target = target
        self._program = program
        self.state = state

    @property
    def plan(self) -> Plan:
        """The plan now in the kernel."""
        return self.state.plan

    @classmethod
    def attach(cls, target: Target, plan: Plan) -> Attachment:
        """Attach to `target` (see module docstring); AttachError if it is in use, rolled back on any error."""
        require_privileges()
        if target.state_path.exists():
            raise AttachError(f"{target.describe()} is already attached (state {target.state_path}); "
                              "run detach first")
        ensure_bpffs(target.bpffs)
        with tc.open_netlink(target.netns) as ipr:
            index = tc.interface_index(ipr, target.dev, target.netns)
            original = tc.snapshot(ipr, index)
            tc.check_replaceable(original, target.dev)
        unpin(target.pin_dir)  # leftovers of a crashed loader: start from fresh maps
        program = TenantProgram.load(target.pin_dir)
        state = State(plan, original)
        try:
            program.write_plan(plan)
            with tc.open_netlink(target.netns) as ipr:
                state = State(plan, original, added_root=True)
                tc.add_htb(ipr, index, plan)
                state = State(plan, original, added_root=True, added_clsact=True)
                tc.add_classifier(ipr, index, program.function_fd("egress"), program.function_fd("ingress"))
            _write_state(target, state)
        except BaseException:
            log.warning("attach to %s failed: removing what was added", target.describe())
            _undo(target, state)
            program.close()
            raise
        log.info("attached to %s: %d classes, %s total", target.describe(), len(plan.classes), plan.total_bps)
        return cls(target, program, state)

    @classmethod
    def open(cls, target: Target) -> Attachment:
        """The attachment recorded for `target`; AttachError if there is none."""
        require_privileges()
        try:
            state = State.from_json(target.state_path.read_text())
        except FileNotFoundError:
            raise AttachError(f"nothing attached to {target.describe()} (no state {target.state_path})") from None
        return cls(target, TenantProgram.load(target.pin_dir), state)

    def status(self) -> Status:
        """Classes with BPF and HTB counters, port rules, learnt connections."""
        counters = self._program.class_counters()
        with tc.open_netlink(self.target.netns) as ipr:
            index = tc.interface_index(ipr, self.target.dev, self.target.netns)
            htb = tc.class_stats(ipr, index)
            qdiscs = tc.snapshot(ipr, index)
        plan = self.plan
        classes = tuple(ClassStatus(c.name, format_handle(c.handle), c.rate_bps, c.ceil_bps, c.prio, c.dscp,
                                    {d: counters[(c.slot, d)] for d in DIRECTIONS}, htb.get(c.handle))
                        for c in plan.classes)
        port_counters = self._program.port_counters()
        ports = tuple(PortStatus(r.port, r.label, r.qos_class,
                                 {d: port_counters.get((r.port, d), Counter()) for d in DIRECTIONS})
                      for r in plan.port_rules)
        return Status(self.target, plan.total_bps, plan.default_class.name, classes,
                      {d: counters[(0, d)] for d in DIRECTIONS}, ports, self._program.learnt_flows(), qdiscs)

    def update(self, plan: Plan) -> None:
        """Apply a changed plan in place: maps rewritten, HTB classes changed; the program is not reloaded."""
        if plan == self.plan:
            return
        with tc.open_netlink(self.target.netns) as ipr:
            index = tc.interface_index(ipr, self.target.dev, self.target.netns)
            tc.change_htb(ipr, index, self.plan, plan)
        self._program.write_plan(plan)
        self.state = State(plan, self.state.original, self.state.added_root, self.state.added_clsact)
        _write_state(self.target, self.state)
        log.info("updated %s: %s", self.target.describe(), [c.name for c in plan.classes])

    def detach(self) -> None:
        """Remove what attach added and check the interface is as before; AttachError if it is not."""
        problems = _undo(self.target, self.state)
        self._program.close()
        if problems:
            raise AttachError(f"detach from {self.target.describe()}: {'; '.join(problems)}")
        log.info("detached from %s", self.target.describe())

    def close(self) -> None:
        """Release this process's handles; the attachment stays in the kernel."""
        self._program.close()


def _write_state(target: Target, state: State) -> None:
    target.state_path.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.state_path.with_suffix(f".tmp{os.getpid()}")
    temporary.write_text(state.to_json())
    temporary.replace(target.state_path)


def _undo(target: Target, state: State) -> list[str]:
    """Delete what `state` says was added, unpin, forget the state; returns problems found."""
    problems: list[str] = []
    try:
        with tc.open_netlink(target.netns) as ipr:
            index = tc.interface_index(ipr, target.dev, target.netns)
            problems += tc.remove(ipr, index, clsact=state.added_clsact, root=state.added_root)
            now = tc.snapshot(ipr, index)
            if not problems and now != state.original:
                problems.append(f"qdiscs now {[q.describe() for q in now]}, before attach "
                                f"{[q.describe() for q in state.original]}")
    except tc.InterfaceError as error:  # the namespace or interface is gone, and its qdiscs with it
        log.info("%s", error)
    unpin(target.pin_dir)
    target.state_path.unlink(missing_ok=True)
    return problems
