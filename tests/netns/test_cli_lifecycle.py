"""`python -m ebpf.cli` attach / status / update / detach / watch on a namespace's interface: detach
(also on SIGTERM, and after a failed attach) leaves the interface exactly as it was, and update
changes classes and maps without reloading the program."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from ebpf import tc
from ebpf.loader import Attachment, AttachError, Target
from ebpf.netns_bed import VethBed, in_netns, run
from ebpf.qos_config import load_plan
from services.launcher import ROOT


def cli(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([sys.executable, "-m", "ebpf.cli", *args], capture_output=True, text=True,
                            timeout=60, cwd=ROOT)
    if check:
        assert result.returncode == 0, result.stderr[-2000:]
    return result


def interface_view(bed: VethBed) -> str:
    """qdiscs and filters of the left interface, without counters."""
    dev = bed.left.dev
    return "\n".join(run(in_netns(bed.left.netns, ["tc", *what, "dev", dev, *where]))
                     for what, where in ((["qdisc", "show"], []), (["filter", "show"], ["egress"]),
                                         (["filter", "show"], ["ingress"]), (["class", "show"], [])))


def program_id(bed: VethBed) -> str:
    shown = run(in_netns(bed.left.netns, ["tc", "filter", "show", "dev", bed.left.dev, "egress"]))
    match = re.search(r"\bid (\d+)", shown)
    assert match, shown
    return match.group(1)


def htb_rates(bed: VethBed) -> dict[str, str]:
    shown = run(in_netns(bed.left.netns, ["tc", "class", "show", "dev", bed.left.dev]))
    return dict(re.findall(r"class htb (1:[0-9a-f]+) .*?rate (\S+)", shown))


def common(bed: VethBed, state_dir: Path) -> list[str]:
    return ["--dev", bed.left.dev, "--netns", bed.left.netns, "--state-dir", str(state_dir)]


def test_attach_status_update_detach(bed: VethBed, state_dir: Path, tenants_80_20: Path) -> None:
    before = interface_view(bed)
    cli("attach", *common(bed, state_dir), "--tenants", str(tenants_80_20), "--rate", "20mbit",
        "--tenant-port", "globex=9000")
    try:
        assert htb_rates(bed) == {"1:1": "20Mbit", "1:10": "16Mbit", "1:20": "4Mbit"}
        status = json.loads(cli("status", *common(bed, state_dir), "--json").stdout)
        assert [(c["name"], c["handle"], c["dscp"]) for c in status["classes"]] == [("realtime", "1:10", 46),
                                                                                   ("bulk", "1:20", 10)]
        assert status["default_class"] == "bulk"
        assert status["ports"][0]["label"] == "globex" and status["ports"][0]["qos_class"] == "bulk"
        assert "realtime" in cli("status", *common(bed, state_dir)).stdout
        loaded = program_id(bed)
        tenants_80_20.write_text(tenants_80_20.read_text().replace("80}", "50}").replace("20}", "50}"))
        cli("update", *common(bed, state_dir), "--tenants", str(tenants_80_20))
        assert htb_rates(bed) == {"1:1": "20Mbit", "1:10": "10Mbit", "1:20": "10Mbit"}
        assert program_id(bed) == loaded, "update must not reload the program"
    finally:
        cli("detach", *common(bed, state_dir))
    assert interface_view(bed) == before
    assert not list(state_dir.rglob("*.json"))
    failed = cli("detach", *common(bed, state_dir), check=False)
    assert failed.returncode == 1 and "nothing attached" in failed.stderr


def test_watch_serves_metrics_follows_config_and_detaches_on_sigterm(bed: VethBed, state_dir: Path,
                                                                     tenants_80_20: Path) -> None:
    before = interface_view(bed)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    watch = subprocess.Popen([sys.executable, "-m", "ebpf.cli", "watch", *common(bed, state_dir), "--tenants",
                              str(tenants_80_20), "--rate", "20mbit", "--metrics-port", str(port),
                              "--metrics-host", "127.0.0.1", "--interval", "0.2"],
                             cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        metrics = _scrape(port, watch)
        assert f'auditmesh_ebpf_class_bytes_total{{class="realtime",dev="{bed.left.dev}",direction="egress"}}' in metrics
        assert "auditmesh_ebpf_htb_sent_bytes_total" in metrics
        loaded = program_id(bed)
        tenants_80_20.write_text(tenants_80_20.read_text().replace("80}", "70}").replace("20}", "30}"))
        deadline = time.monotonic() + 15
        while htb_rates(bed).get("1:10") != "14Mbit":
            assert time.monotonic() < deadline, f"watch did not apply the new shares: {htb_rates(bed)}"
            time.sleep(0.2)
        assert program_id(bed) == loaded
        watch.send_signal(signal.SIGTERM)
        assert watch.wait(timeout=20) == 0, watch.stderr.read() if watch.stderr else ""
    finally:
        if watch.poll() is None:
            watch.kill()
            watch.wait()
    assert interface_view(bed) == before
    assert not list(state_dir.rglob("*.json"))


def _scrape(port: int, watch: subprocess.Popen[str]) -> str:
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as answer:
                text: str = answer.read().decode()
                return text
        except OSError:
            if watch.poll() is not None:
                raise AssertionError(f"watch exited: {watch.stderr.read() if watch.stderr else ''}") from None
            assert time.monotonic() < deadline, "watch did not serve /metrics"
            time.sleep(0.2)


def test_attach_refuses_an_interface_with_foreign_clsact(bed: VethBed, state_dir: Path, tenants_80_20: Path) -> None:
    run(in_netns(bed.left.netns, ["tc", "qdisc", "add", "dev", bed.left.dev, "clsact"]))
    before = interface_view(bed)
    refused = cli("attach", *common(bed, state_dir), "--tenants", str(tenants_80_20), "--rate", "20mbit", check=False)
    assert refused.returncode == 1 and "already has a clsact qdisc" in refused.stderr
    assert interface_view(bed) == before


def test_failed_attach_is_rolled_back(bed: VethBed, state_dir: Path, tenants_80_20: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    before = interface_view(bed)
    target = Target(bed.left.dev, bed.left.netns, state_dir=state_dir)

    def broken(*args: object) -> None:
        raise AttachError("injected failure after the HTB root was added")

    monkeypatch.setattr(tc, "add_classifier", broken)
    with pytest.raises(AttachError, match="injected"):
        Attachment.attach(target, load_plan(tenants_80_20, 20_000_000))
    assert interface_view(bed) == before
    assert not target.state_path.exists() and not target.pin_dir.exists()
