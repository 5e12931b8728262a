"""The loader's pure parts: targets, the state file, the status table and CLI argument parsing."""

from __future__ import annotations

from pathlib import Path

import pytest

from ebpf.bpf_program import Counter
from ebpf.cli import build_parser, format_status
from ebpf.loader import ClassStatus, State, Status, Target
from ebpf.plan import PortRule, build_plan
from ebpf.tc import ClassStats, InterfaceError, QdiscInfo, check_replaceable
from services.common.qos import DEFAULT_CLASSES

ROOT_PARENT = 0xFFFFFFFF


def test_target_paths_and_validation(tmp_path: Path) -> None:
    target = Target("veth0", "blue", tmp_path / "bpf", tmp_path / "state")
    assert target.pin_dir == tmp_path / "bpf" / "auditmesh" / "blue" / "veth0"
    assert target.state_path == tmp_path / "state" / "blue" / "veth0.json"
    assert Target("eth0").pin_dir.parts[-2:] == ("-", "eth0")
    with pytest.raises(ValueError, match="dev"):
        Target("../../etc")
    with pytest.raises(ValueError, match="netns"):
        Target("eth0", "a/b")


def test_state_round_trips() -> None:
    plan = build_plan(DEFAULT_CLASSES, 10**9, port_rules=[PortRule(9000, "realtime", "acme")])
    state = State(plan, (QdiscInfo("noqueue", 0, ROOT_PARENT),), added_root=True, added_clsact=True)
    assert State.from_json(state.to_json()) == state


def test_only_kernel_default_root_qdiscs_are_replaced() -> None:
    check_replaceable((QdiscInfo("noqueue", 0, ROOT_PARENT),), "eth0")
    check_replaceable((QdiscInfo("mq", 0, ROOT_PARENT), QdiscInfo("fq_codel", 0, 0x1)), "eth0")
    with pytest.raises(InterfaceError, match="configured root qdisc"):
        check_replaceable((QdiscInfo("htb", 0x10000, ROOT_PARENT),), "eth0")
    with pytest.raises(InterfaceError, match="clsact"):
        check_replaceable((QdiscInfo("noqueue", 0, ROOT_PARENT), QdiscInfo("clsact", 0xFFFF0000, 0xFFFFFFF1)), "eth0")


def test_status_table_and_json() -> None:
    counters = {"egress": Counter(10, 15000), "ingress": Counter(5, 300)}
    status = Status(Target("eth0"), 20_000_000, "bulk",
                    (ClassStatus("realtime", "1:10", 16_000_000, 20_000_000, 0, 46, counters,
                                 ClassStats(0x10010, 15000, 10, 0, 0)),),
                    {"egress": Counter(), "ingress": Counter()}, (), 3)
    table = format_status(status)
    assert "realtime" in table and "16mbit" in table and "15000" in table and "3 learnt" in table
    data = status.to_dict()
    assert data["classes"][0]["bpf"]["egress"] == {"packets": 10, "bytes": 15000}
    assert data["classes"][0]["htb"]["bytes"] == 15000


def test_cli_parses_rules_and_rates() -> None:
    args = build_parser().parse_args(["attach", "--dev", "eth0", "--rate", "1gbit", "--port", "8111=standard",
                                      "--tenant-port", "acme=9000"])
    assert args.rate == 10**9 and args.port == [PortRule(8111, "standard")] and args.tenant_port == [("acme", 9000)]
    with pytest.raises(SystemExit):
        build_parser().parse_args(["attach", "--dev", "eth0", "--rate", "fast"])
    with pytest.raises(SystemExit):
        build_parser().parse_args(["attach", "--dev", "eth0", "--rate", "1gbit", "--port", "standard"])


def test_sigterm_to_pyroute2s_forked_helper_ends_it_without_unwinding_the_parents_stack() -> None:
    # Regression: pyroute2 forks a helper per namespace socket and stops it with SIGTERM; the CLI's
    # handler, inherited by the fork, raised into the copied attach() and rolled back the parent's work.
    import os

    from ebpf import cli

    pid = os.fork()
    if pid == 0:
        try:
            cli._request_stop(15, None)
        finally:
            os._exit(0)  # reached only if the handler raised instead of exiting
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 143
    with pytest.raises(cli.StopRequested):
        cli._request_stop(15, None)
