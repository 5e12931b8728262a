"""Each service's command line, as the launcher builds and logs it, says everything about where it
runs: parsed by the service's own CLI over its config file, with no AUDITMESH_* variable set, it
gives the addresses the mesh assigned (regression: ports and upstreams came only from the
environment, so the logged command did not reproduce the process)."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.common.serving import modality_main
from services.common.serving.modality_config import load_service_config
from services.launcher import MATCH, MODALITIES, Mesh
from services.router import main as router_main
from services.router.config import load_router_config


@pytest.fixture(autouse=True)
def no_auditmesh_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    import os
    for name in list(os.environ):
        if name.startswith("AUDITMESH_"):
            monkeypatch.delenv(name)


def test_router_lane_commands_reproduce_the_mesh_addresses(tmp_path: Path) -> None:
    mesh = Mesh(20000, metrics_base_port=21000, state_dir=tmp_path)
    for router in mesh.routers:
        command = mesh.command(router)
        assert command[1:3] == ["-m", "services.router"]
        args = router_main.parse_args(command[3:])
        config = router_main.arguments_applied(load_router_config(args.config, args.lane), args)
        assert config.server.listen == mesh.address(router)
        assert config.server.metrics_listen == f"127.0.0.1:{mesh.metrics_port(router)}"
        assert {m: u.url for m, u in config.upstreams.items()} == {m: mesh.address(m) for m in (*MODALITIES, MATCH)}
        assert config.lifecycle.store_path == str(tmp_path / "policy_store.sqlite")
        assert config.lifecycle.audit_path == str(tmp_path / "audit.sqlite")
        assert (config.lane.name if config.lane else "") == mesh.lanes[router]


def test_modality_commands_reproduce_the_mesh_addresses() -> None:
    mesh = Mesh(20000)  # no metrics endpoints
    for service in (*MODALITIES, MATCH):
        command = mesh.command(service)
        assert command[1:3] == ["-m", f"services.{service}.server"]
        args = modality_main.parse_args(service, command[3:])
        config = modality_main.arguments_applied(load_service_config(args.config), args)
        assert config.server.listen == mesh.address(service) and config.server.metrics_listen == ""


def test_extra_env_settings_become_flags_that_win_over_the_mesh_values() -> None:
    mesh = Mesh(20000, extra_env={"AUDITMESH_TEXT_URL": "10.0.0.9:7000", "AUDITMESH_TENANTS_FILE": "/t.yaml",
                                  "AUDITMESH_MODEL_REPOSITORY": "/models", "OTEL_TRACES_EXPORTER": "console"})
    router = mesh.command("router")
    assert router[router.index("--text-url") + 1] == "10.0.0.9:7000"
    assert router[router.index("--tenants-file") + 1] == "/t.yaml"
    assert "--model-repository" not in router
    text = mesh.command("text")
    assert text[text.index("--model-repository") + 1] == "/models" and "--text-url" not in text


def test_flags_override_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUDITMESH_LISTEN", "127.0.0.1:1111")
    monkeypatch.setenv("AUDITMESH_METRICS_LISTEN", "127.0.0.1:2222")
    args = modality_main.parse_args("text", ["--listen", "127.0.0.1:3333", "--metrics-listen", "OFF"])
    config = modality_main.arguments_applied(load_service_config(args.config), args)
    assert config.server.listen == "127.0.0.1:3333" and config.server.metrics_listen == ""
    args = modality_main.parse_args("text", [])  # no flags: the environment still applies
    config = modality_main.arguments_applied(load_service_config(args.config), args)
    assert config.server.listen == "127.0.0.1:1111" and config.server.metrics_listen == "127.0.0.1:2222"


@pytest.mark.parametrize("argv", [["--listen", "8101"], ["--listen", "host:port"], ["--metrics-listen", "x:99999"],
                                  ["--text-url", "nohost"]])
def test_bad_addresses_are_usage_errors(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        router_main.parse_args(argv)
    assert caught.value.code == 2
    assert "expected host:port" in capsys.readouterr().err


def test_the_match_service_reads_the_banks_where_the_routers_write_them(tmp_path: Path) -> None:
    alone = Mesh(20000, state_dir=tmp_path)
    assert alone.environment(MATCH)["AUDITMESH_BANKS_PATH"] == str(tmp_path / "banks.sqlite")
    assert "AUDITMESH_BANKS_DSN" not in alone.environment(MATCH)
    dsn = "postgresql://auditmesh@db:5432/auditmesh"
    shared = Mesh(20000, state_dir=tmp_path, extra_env={"AUDITMESH_POSTGRES_DSN": dsn})
    assert shared.environment(MATCH)["AUDITMESH_BANKS_DSN"] == dsn  # the routers' BankAdmin writes there
    assert "AUDITMESH_BANKS_DSN" not in shared.environment("text")
    named = Mesh(20000, state_dir=tmp_path, extra_env={"AUDITMESH_POSTGRES_DSN": dsn,
                                                       "AUDITMESH_BANKS_PATH": str(tmp_path / "b.sqlite")})
    assert "AUDITMESH_BANKS_DSN" not in named.environment(MATCH)  # a file named on purpose: the routers write it
