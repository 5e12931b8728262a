"""The launcher's Mesh starts one router process per lane of router.yaml, on the ports after the
modality services, each told its lane and every address on its command line (no processes are
started here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.launcher import ROOT, Mesh, mesh_services


def flags(command: list[str]) -> dict[str, str]:
    """`--flag value` pairs of a command line (after `python -m module`)."""
    words = command[3:]
    return dict(zip(words[::2], words[1::2]))


def test_shipped_mesh_has_a_router_per_lane_after_the_modality_services() -> None:
    assert mesh_services() == ("router", "text", "vision", "ocr", "router-bulk", "match")
    mesh = Mesh(20000, metrics_base_port=21000)
    assert mesh.routers == ("router", "router-bulk")
    assert [mesh.port(s) for s in mesh.services] == [20000, 20001, 20002, 20003, 20004, 20006]  # match past the admin port
    assert mesh.metrics_port("router-bulk") == 21004
    assert mesh.router_for("realtime") == "router" and mesh.router_for("bulk") == "router-bulk"
    bulk = flags(mesh.command("router-bulk"))
    assert bulk["--lane"] == "bulk" and bulk["--listen"] == "127.0.0.1:20004"
    assert bulk["--metrics-listen"] == "127.0.0.1:21004"
    assert bulk["--text-url"] == "127.0.0.1:20001" and bulk["--ocr-url"] == "127.0.0.1:20003"
    assert bulk["--match-url"] == "127.0.0.1:20006" and flags(mesh.command("match"))["--listen"] == "127.0.0.1:20006"
    assert flags(mesh.command("router"))["--policy-store"] == bulk["--policy-store"]  # lanes are replicas
    with pytest.raises(ValueError, match="unknown service"):
        mesh.port("router-fast")
    with pytest.raises(ValueError, match="unknown service"):
        mesh.command("router-fast")


def test_a_config_without_lanes_runs_one_router(tmp_path: Path) -> None:
    text = (ROOT / "config" / "router.yaml").read_text(encoding="utf-8")
    start, end = text.index("lanes:"), text.index("tenants_file:")
    (tmp_path / "router.yaml").write_text(text[:start] + text[end:], encoding="utf-8")
    mesh = Mesh(20000, config_dir=tmp_path)
    assert mesh.services == ("router", "text", "vision", "ocr", "match") and mesh.routers == ("router",)
    assert mesh.router_for("bulk") == "router"
    assert "--lane" not in flags(mesh.command("router"))
