"""docker-compose.yml and the Dockerfiles agree with the code (no Docker engine needed).

Checks for every compose service: its Dockerfile exists and runs the same command; the command's
module exists and its --config file loads and names that service; the listen port agrees across
compose env, Dockerfile ENV/EXPOSE/HEALTHCHECK and the router's upstream URLs; every AUDITMESH_* env
name used is one the code reads.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest
import yaml

from services.common.service_config import ENV_LISTEN, ENV_METRICS_LISTEN, ENV_MODEL_REPOSITORY, load_service_config
from services.router.config import ENV_POLICIES_DIR, ENV_TENANTS_FILE, ENV_UPSTREAM_URL, load_router_config

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]
KNOWN_ENV = {ENV_LISTEN, ENV_METRICS_LISTEN, ENV_MODEL_REPOSITORY, ENV_TENANTS_FILE, ENV_POLICIES_DIR,
             *ENV_UPSTREAM_URL.values()}


def dockerfile(name: str) -> str:
    return (ROOT / str(SERVICES[name]["build"]["dockerfile"])).read_text()


def listen_port(name: str) -> int:
    return int(SERVICES[name]["environment"]["AUDITMESH_LISTEN"].rpartition(":")[2])


def test_one_container_per_service() -> None:
    assert set(SERVICES) == {"router", "text", "vision", "ocr"}


@pytest.mark.parametrize("name", ["router", "text", "vision", "ocr"])
def test_command_module_config_and_dockerfile_agree(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    service = SERVICES[name]
    command = service["command"]
    assert command[:2] == ["python", "-m"] and command[2] == f"services.{name}.server"
    assert importlib.util.find_spec(command[2]) is not None
    cmd_line = re.search(r"^CMD (\[.*\])$", dockerfile(name), re.M)
    assert cmd_line and json.loads(cmd_line.group(1)) == command
    config_path = ROOT / command[command.index("--config") + 1]
    for key, value in service["environment"].items():
        monkeypatch.setenv(key, str(value))
    if name == "router":
        config = load_router_config(config_path)
        assert config.server.listen == service["environment"]["AUDITMESH_LISTEN"]
        assert (ROOT / config.tenants_file).exists() and (ROOT / config.policies_dir).is_dir()
    else:
        assert load_service_config(config_path).service == name


@pytest.mark.parametrize("name", ["router", "text", "vision", "ocr"])
def test_ports_agree_everywhere(name: str) -> None:
    port = listen_port(name)
    text = dockerfile(name)
    assert f"EXPOSE {port}" in text
    assert f"AUDITMESH_LISTEN=0.0.0.0:{port}" in text
    assert f'"127.0.0.1:{port}"]' in text  # HEALTHCHECK probes the same port
    published = [str(p) for p in SERVICES[name].get("ports", [])] + [str(p) for p in SERVICES[name].get("expose", [])]
    assert any(p == str(port) or p.endswith(f":{port}") for p in published)


@pytest.mark.parametrize("name", ["router", "text", "vision", "ocr"])
def test_metrics_endpoint_listens_on_all_interfaces_and_is_exposed(name: str) -> None:
    listen = SERVICES[name]["environment"]["AUDITMESH_METRICS_LISTEN"]
    assert listen.startswith("0.0.0.0:")  # the config files' 127.0.0.1 would be unreachable from Prometheus
    assert listen.rpartition(":")[2] in [str(p) for p in SERVICES[name]["expose"]]


def test_router_upstreams_point_at_the_modality_containers() -> None:
    env = SERVICES["router"]["environment"]
    for modality, variable in ENV_UPSTREAM_URL.items():
        assert env[variable] == f"{modality}:{listen_port(modality)}"
        assert modality in SERVICES["router"]["depends_on"]


def test_only_env_names_the_code_reads() -> None:
    used = {key for service in SERVICES.values() for key in service.get("environment", {})}
    assert used <= KNOWN_ENV, used - KNOWN_ENV
    for name in SERVICES:
        env_lines = re.findall(r"(AUDITMESH_[A-Z_]+)=", dockerfile(name))
        assert set(env_lines) <= KNOWN_ENV
