"""Command line for the tenant classifier. Run as root (or with CAP_BPF, CAP_NET_ADMIN, CAP_PERFMON,
plus CAP_SYS_ADMIN for --netns)::

    python -m ebpf.cli attach --dev eth0 --tenants config/tenants.yaml --rate 1gbit
    python -m ebpf.cli status --dev eth0 [--json]
    python -m ebpf.cli update --dev eth0 --tenants config/tenants.yaml       # maps + HTB, no reload
    python -m ebpf.cli detach --dev eth0
    python -m ebpf.cli watch  --dev eth0 --tenants config/tenants.yaml --rate 1gbit --metrics-port 9108

`watch` attaches, serves Prometheus metrics, applies changes of the tenants file as they happen, and
detaches on SIGTERM or Ctrl-C (the DaemonSet mode). Exit codes: 0 done, 1 failed (the message says
why), 2 bad arguments.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Sequence

from ebpf.bpf_program import EbpfSetupError
from ebpf.loader import DEFAULT_BPFFS, DEFAULT_STATE_DIR, AttachError, Attachment, Status, Target
from ebpf.plan import DEFAULT_LEAF_LIMIT, Plan, PortRule, format_handle
from ebpf.qos_config import load_plan
from ebpf.tc import InterfaceError
from ebpf.units import format_rate, parse_rate
from pyroute2.netlink.exceptions import NetlinkError

from services.common.config import ConfigError

log = logging.getLogger("ebpf.cli")
EXPECTED_ERRORS = (AttachError, EbpfSetupError, InterfaceError, ConfigError, ValueError, OSError, NetlinkError)


class StopRequested(Exception):
    """SIGTERM arrived: unwind through detach (watch) or the rollback of attach."""


def _port_rule(text: str) -> PortRule:
    port, sep, qos_class = text.partition("=")
    if not sep or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected PORT=CLASS, got {text!r}")
    return PortRule(int(port), qos_class)


def _tenant_port(text: str) -> tuple[str, int]:
    tenant, sep, port = text.partition("=")
    if not sep or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected TENANT=PORT, got {text!r}")
    return tenant, int(port)


def _rate(text: str) -> int:
    try:
        return parse_rate(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m ebpf.cli", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    helps = {"attach": "load the classifier, add the HTB hierarchy and clsact filters, then exit (they stay)",
             "status": "print the classes with the classifier's and HTB's counters",
             "update": "rewrite the classifier's maps and the HTB classes from the tenants file, without reloading",
             "detach": "remove the filters and the HTB root that attach added; the interface is as before",
             "watch": "attach, serve metrics, follow changes of the tenants file; detach on SIGTERM/Ctrl-C"}
    for name, text in helps.items():
        sub = commands.add_parser(name, help=text, description=text)
        sub.add_argument("--dev", required=True, help="network interface, e.g. eth0")
        sub.add_argument("--netns", help="named network namespace (ip netns) holding --dev; default: this one")
        sub.add_argument("--bpffs", type=Path, default=DEFAULT_BPFFS,
                         help=f"bpf filesystem for the pinned maps, mounted if needed (default {DEFAULT_BPFFS})")
        sub.add_argument("--state-dir", type=Path, default=DEFAULT_STATE_DIR,
                         help=f"where attach records what it added (default {DEFAULT_STATE_DIR})")
        if name in ("attach", "update", "watch"):
            _add_plan_arguments(sub, rate_required=name != "update")
        if name == "status":
            sub.add_argument("--json", action="store_true", help="print JSON instead of a table")
        if name == "watch":
            sub.add_argument("--metrics-port", type=int, default=9108,
                             help="Prometheus /metrics port (0 = none; default 9108)")
            sub.add_argument("--metrics-host", default="0.0.0.0", help="address for /metrics (default 0.0.0.0)")
            sub.add_argument("--interval", type=float, default=2.0,
                             help="seconds between checks of the tenants file (default 2)")
    return parser


def _add_plan_arguments(sub: argparse.ArgumentParser, *, rate_required: bool) -> None:
    sub.add_argument("--tenants", type=Path, default=Path("config/tenants.yaml"),
                     help="tenants file with qos_classes (default config/tenants.yaml)")
    sub.add_argument("--rate", type=_rate, required=rate_required,
                     help="the link's total rate in tc units, e.g. 1gbit, 20mbit"
                          + ("" if rate_required else " (default: the attached one)"))
    sub.add_argument("--port", type=_port_rule, action="append", default=[], metavar="PORT=CLASS",
                     help="TCP port (source or destination) whose traffic is in CLASS; repeatable")
    sub.add_argument("--tenant-port", type=_tenant_port, action="append", default=[], metavar="TENANT=PORT",
                     help="a tenant's dedicated TCP port: its traffic goes in the tenant's class and is "
                          "counted per tenant; repeatable")
    sub.add_argument("--leaf-limit", type=int, default=DEFAULT_LEAF_LIMIT,
                     help=f"packets each class's pfifo holds (default {DEFAULT_LEAF_LIMIT})")


def _plan(args: argparse.Namespace, rate: int) -> Plan:
    return load_plan(args.tenants, rate, port_rules=args.port, tenant_ports=dict(args.tenant_port),
                     leaf_limit=args.leaf_limit)


_MAIN_PID = os.getpid()


def _request_stop(signum: int, frame: FrameType | None) -> None:
    if os.getpid() != _MAIN_PID:
        # pyroute2 forks a helper to open a socket in another namespace and ends it with SIGTERM: the
        # fork must die at once, not unwind the parent's copied stack through detach/rollback.
        os._exit(128 + signum)
    raise StopRequested(f"signal {signum}")


def format_status(status: Status) -> str:
    """A table for people: one line per class, then port rules."""
    lines = [f"{status.target.describe()}: total {format_rate(status.total_bps)}, default class "
             f"{status.default_class}, {status.learnt_flows} learnt connections",
             f"{'class':<13}{'htb':<6}{'rate':>9}{'prio':>5}{'dscp':>5}{'egress B':>14}{'ingress B':>14}"
             f"{'htb sent B':>14}{'htb drops':>10}"]
    for c in status.classes:
        sent, drops = (c.htb.bytes, c.htb.drops) if c.htb else (0, 0)
        lines.append(f"{c.name:<13}{c.handle:<6}{format_rate(c.rate_bps):>9}{c.prio:>5}{c.dscp:>5}"
                     f"{c.bpf['egress'].bytes:>14}{c.bpf['ingress'].bytes:>14}{sent:>14}{drops:>10}")
    lines.append(f"{'unclassified':<13}{'-':<6}{'':>9}{'':>5}{'':>5}{status.unclassified['egress'].bytes:>14}"
                 f"{status.unclassified['ingress'].bytes:>14}")
    for p in status.ports:
        lines.append(f"port {p.port} ({p.label}) -> {p.qos_class}: egress {p.bpf['egress'].bytes} B, "
                     f"ingress {p.bpf['ingress'].bytes} B")
    return "\n".join(lines)


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def _watch(args: argparse.Namespace, target: Target) -> int:
    from prometheus_client import CollectorRegistry, start_http_server

    from ebpf.metrics import AttachmentCollector

    attachment = Attachment.attach(target, _plan(args, args.rate))
    lock = threading.Lock()  # scrapes (HTTP thread) and updates (this thread) take turns

    def locked_status() -> Status:
        with lock:
            return attachment.status()

    try:
        if args.metrics_port:
            registry = CollectorRegistry()
            registry.register(AttachmentCollector(locked_status))
            start_http_server(args.metrics_port, addr=args.metrics_host, registry=registry)
            log.info("metrics on http://%s:%d/metrics", args.metrics_host, args.metrics_port)
        seen = _read(args.tenants)
        while True:
            time.sleep(args.interval)
            # Content, not mtime: a half-written file read once must not hide the finished one, whose
            # mtime may fall in the same clock tick.
            content = _read(args.tenants)
            if content == seen or content is None:
                continue
            seen = content
            try:
                with lock:
                    attachment.update(_plan(args, args.rate))
            except (ConfigError, ValueError) as error:  # keep the running plan until the file is fixed
                log.error("tenants file changed but is invalid, keeping the current classes: %s", error)
    finally:
        attachment.detach()


def run(args: argparse.Namespace) -> int:
    """Execute one parsed command."""
    target = Target(args.dev, args.netns, args.bpffs, args.state_dir)
    if args.command == "attach":
        Attachment.attach(target, _plan(args, args.rate)).close()
        print(f"attached to {target.describe()}; `detach` removes it")
    elif args.command == "status":
        attachment = Attachment.open(target)
        status = attachment.status()
        attachment.close()
        print(json.dumps(status.to_dict(), indent=1) if args.json else format_status(status))
    elif args.command == "update":
        attachment = Attachment.open(target)
        attachment.update(_plan(args, args.rate or attachment.plan.total_bps))
        print(f"updated {target.describe()}: " + ", ".join(f"{c.name} {format_handle(c.handle)} "
                                                          f"{format_rate(c.rate_bps)}" for c in attachment.plan.classes))
        attachment.close()
    elif args.command == "detach":
        Attachment.open(target).detach()
        print(f"detached from {target.describe()}")
    else:
        return _watch(args, target)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    signal.signal(signal.SIGTERM, _request_stop)   # unwinds through detach/rollback like Ctrl-C does
    try:
        return run(args)
    except (KeyboardInterrupt, StopRequested):
        return 0 if args.command == "watch" else 130
    except EXPECTED_ERRORS as error:
        print(f"ebpf: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
