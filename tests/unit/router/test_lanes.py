"""Ingress lanes: config validation, lane selection, the per-request class check, the router config."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.common.config import ConfigError
from services.common.errors import PermissionDeniedError
from services.router.config import load_router_config
from services.router.lanes import Lane, LaneGate, check_classes_covered, log_service_name, pick_lane, validate_lanes

INTERACTIVE = Lane("interactive", ("realtime", "standard"), "127.0.0.1:8100")
BULK = Lane("bulk", ("bulk",), "127.0.0.1:8104", nice=10, advertise="bulk.example:443")
ROOT = Path(__file__).resolve().parents[3]


def test_lane_fields_are_validated() -> None:
    with pytest.raises(ValueError, match="classes"):
        Lane("x", (), "127.0.0.1:1")
    with pytest.raises(ValueError, match="nice"):
        Lane("x", ("bulk",), "127.0.0.1:1", nice=-5)
    with pytest.raises(ValueError, match="listen"):
        Lane("x", ("bulk",), "8100")


@pytest.mark.parametrize("lanes, message", [
    ((INTERACTIVE, Lane("interactive", ("bulk",), "127.0.0.1:1")), "name 'interactive'"),
    ((INTERACTIVE, Lane("b", ("bulk",), "127.0.0.1:8100")), "listen '127.0.0.1:8100'"),
    ((INTERACTIVE, Lane("b", ("standard",), "127.0.0.1:1")), "class 'standard' is in two lanes"),
])
def test_lanes_must_not_overlap(lanes: tuple[Lane, ...], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        validate_lanes(lanes)


def test_pick_lane_defaults_to_the_first_and_names_the_known_ones() -> None:
    assert pick_lane((INTERACTIVE, BULK), None) is INTERACTIVE
    assert pick_lane((INTERACTIVE, BULK), "bulk") is BULK
    assert pick_lane((), None) is None
    with pytest.raises(ValueError, match=r"unknown lane; the config defines \['interactive', 'bulk'\]"):
        pick_lane((INTERACTIVE, BULK), "fast")
    with pytest.raises(ValueError, match="defines no lanes"):
        pick_lane((), "bulk")


def test_every_class_needs_exactly_a_known_lane() -> None:
    check_classes_covered((INTERACTIVE, BULK), ["realtime", "standard", "bulk"])
    check_classes_covered((), ["realtime"])  # no lanes: one process serves all
    with pytest.raises(ValueError, match="'bulk' is in no lane"):
        check_classes_covered((INTERACTIVE,), ["realtime", "standard", "bulk"])
    with pytest.raises(ValueError, match="'standard', which the tenants file does not define"):
        check_classes_covered((INTERACTIVE, BULK), ["realtime", "bulk"])


def test_gate_lets_its_classes_through_and_names_the_right_lane_to_others() -> None:
    gate = LaneGate(INTERACTIVE, (INTERACTIVE, BULK))
    gate.check("acme", "realtime")
    gate.check("acme", "standard")
    with pytest.raises(PermissionDeniedError) as raised:
        gate.check("globex", "bulk")
    assert str(raised.value) == ("tenant 'globex' is in QoS class 'bulk', which is served by lane 'bulk' at bulk.example:443; "
                                 "this is lane 'interactive' (classes realtime, standard)")
    LaneGate(None).check("anyone", "bulk")  # no lanes: every class


def test_each_lane_names_itself_in_its_log_lines() -> None:
    assert (log_service_name(INTERACTIVE), log_service_name(BULK)) == ("router-interactive", "router-bulk")


def test_router_config_selects_the_lane_and_its_listen(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AUDITMESH_LISTEN", raising=False)
    monkeypatch.delenv("AUDITMESH_METRICS_LISTEN", raising=False)
    monkeypatch.delenv("AUDITMESH_LANE", raising=False)
    shipped = ROOT / "config" / "router.yaml"
    first = load_router_config(shipped)
    assert first.lane is not None and first.lane.name == "interactive" and first.server.listen == first.lane.listen
    bulk = load_router_config(shipped, "bulk")
    assert bulk.lane is not None and bulk.server.listen == "127.0.0.1:8104" and bulk.server.metrics_listen == "127.0.0.1:9104"
    monkeypatch.setenv("AUDITMESH_LANE", "bulk")
    monkeypatch.setenv("AUDITMESH_LISTEN", "0.0.0.0:9999")
    from_env = load_router_config(shipped)
    assert from_env.lane == bulk.lane and from_env.server.listen == "0.0.0.0:9999"  # env beats the lane's listen
    with pytest.raises(ConfigError, match=r"router.yaml: lanes: --lane 'fast': unknown lane"):
        load_router_config(shipped, "fast")


def test_lane_cannot_be_set_in_the_file(tmp_path: Path) -> None:
    text = (ROOT / "config" / "router.yaml").read_text(encoding="utf-8")
    path = tmp_path / "router.yaml"
    path.write_text(text + "lane: {name: bulk, classes: [bulk], listen: '127.0.0.1:8104'}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="chosen with --lane"):
        load_router_config(path)


def test_the_bulk_lane_refuses_early_and_the_interactive_lane_keeps_grpc_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    from services.common.grpc_server import server_options
    for name in ("AUDITMESH_LISTEN", "AUDITMESH_METRICS_LISTEN", "AUDITMESH_LANE"):
        monkeypatch.delenv(name, raising=False)
    shipped = ROOT / "config" / "router.yaml"
    bulk = load_router_config(shipped, "bulk").server
    assert (bulk.max_concurrent_rpcs, bulk.max_pending_calls) == (256, 128)
    assert ("grpc.server.max_pending_requests", 64) in server_options(bulk)
    assert ("grpc.server.max_pending_requests_hard_limit", 128) in server_options(bulk)
    interactive = load_router_config(shipped, "interactive").server
    assert (interactive.max_concurrent_rpcs, interactive.max_pending_calls) == (0, 0)
    assert not [name for name, _ in server_options(interactive) if name.startswith("grpc.server.")]
