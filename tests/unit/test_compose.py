"""docker-compose.yml and docker/Dockerfile agree with the code (no Docker engine needed).

Checks for every compose service: the one Dockerfile, rendered for the service's build target and
args (tests/dockerfile.py), runs the same command and builds that modality's models (the router none);
the command's module exists and its --config file loads and names that service; the listen port agrees
across compose env, the image's ENV/EXPOSE/HEALTHCHECK and the router's upstream URLs; every AUDITMESH_* env
name used is one the code reads; every router lane in config/router.yaml has its container, on the
lane's port, sharing the policy store volume with the other lanes. Security (issue 12 item 5): only
the router lanes' ports and the admin port are published, on the host's loopback only; modality and
metrics ports stay internal; the modality services run with the internal secrets and mTLS, the routers
present the secret and a client certificate, all from the `mesh-credentials` init container.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import yaml

from services.common.internal_auth import ENV_ADMIN_SECRET_FILE, ENV_SECRET_FILE
from services.common.service_config import ENV_LISTEN, ENV_METRICS_LISTEN, ENV_MODEL_REPOSITORY
from services.common.serving.modality_config import ENV_BANKS_PATH, load_service_config
from services.common.tls_config import (ENV_TLS_CERT_FILE, ENV_TLS_CLIENT_CA_FILE, ENV_TLS_KEY_FILE,
                                        ENV_UPSTREAM_TLS_CA_FILE, ENV_UPSTREAM_TLS_CERT_FILE, ENV_UPSTREAM_TLS_KEY_FILE)
from services.launcher import mesh_services
from services.router.config import (ENV_ADMIN_LISTEN, ENV_ALLOW_DEMO_KEYS, ENV_LANE, ENV_POLICIES_DIR, ENV_TENANTS_FILE,
                                    ENV_UPSTREAM_URL, OPTIONAL_UPSTREAMS, load_router_config)
from tests.dockerfile import Image, render_image

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
#: The init container that makes the secrets and certificates; every other one is a mesh process.
CREDENTIALS = "mesh-credentials"
ALL_SERVICES = COMPOSE["services"]
SERVICES = {name: service for name, service in ALL_SERVICES.items() if name != CREDENTIALS}
KNOWN_ENV = {ENV_LISTEN, ENV_METRICS_LISTEN, ENV_MODEL_REPOSITORY, ENV_TENANTS_FILE, ENV_POLICIES_DIR, ENV_LANE,
             *ENV_UPSTREAM_URL.values(), ENV_ADMIN_LISTEN, ENV_ALLOW_DEMO_KEYS, ENV_SECRET_FILE, ENV_ADMIN_SECRET_FILE,
             ENV_TLS_CERT_FILE, ENV_TLS_KEY_FILE, ENV_TLS_CLIENT_CA_FILE, ENV_UPSTREAM_TLS_CA_FILE,
             ENV_UPSTREAM_TLS_CERT_FILE, ENV_UPSTREAM_TLS_KEY_FILE, ENV_BANKS_PATH}
MODALITY_CONTAINERS = ("text", "vision", "ocr")
#: Known-content matching: no models, so it runs the router image with its own command, port and probe.
MATCH = "match"
ROUTERS = [name for name in SERVICES if name.startswith("router")]
#: Containers whose image's own port is not theirs (the bulk lane and match run the router image on another port).
LANE_CONTAINERS = [name for name in ROUTERS if name != "router"]
OTHER_PORT_CONTAINERS = [*LANE_CONTAINERS, MATCH]


def module(name: str) -> str:
    return "router" if name in ROUTERS else name


def image(name: str) -> Image:
    """The image compose builds for container `name`: its Dockerfile rendered for its target and args."""
    build = ALL_SERVICES[name]["build"]
    args = {key: str(value) for key, value in build.get("args", {}).items()}
    return render_image((ROOT / build["dockerfile"]).read_text(), target=build["target"], args=args)


def listen_port(name: str) -> int:
    return int(SERVICES[name]["environment"]["AUDITMESH_LISTEN"].rpartition(":")[2])


def test_one_container_per_service_and_router_lane() -> None:
    assert set(SERVICES) == set(mesh_services())
    assert LANE_CONTAINERS  # the shipped config has a bulk lane


@pytest.mark.parametrize("name", list(SERVICES))
def test_command_module_config_and_dockerfile_agree(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    service = SERVICES[name]
    command = service["command"]
    expected = "services.router" if name in ROUTERS else f"services.{module(name)}.server"
    assert command[:2] == ["python", "-m"] and command[2] == expected
    assert importlib.util.find_spec(command[2]) is not None
    if name != MATCH:  # match overrides the router image's command with its own
        assert image(name).cmd == command
    config_path = ROOT / command[command.index("--config") + 1]
    for key, value in service["environment"].items():
        monkeypatch.setenv(key, str(value))
    if name in ROUTERS:
        config = load_router_config(config_path)
        assert config.server.listen == service["environment"]["AUDITMESH_LISTEN"]
        assert (ROOT / config.tenants_file).exists() and (ROOT / config.policies_dir).is_dir()
        assert config.lane is not None and config.lane.port == str(listen_port(name))
        assert config.lane.metrics_listen.rpartition(":")[2] == service["environment"]["AUDITMESH_METRICS_LISTEN"].rpartition(":")[2]
        assert name == ("router" if config.lane is config.lanes[0] else f"router-{config.lane.name}")
    else:
        assert load_service_config(config_path).service == name


def test_every_image_comes_from_the_one_dockerfile() -> None:
    assert {service["build"]["dockerfile"] for service in ALL_SERVICES.values()} == {"docker/Dockerfile"}
    assert not list(ROOT.glob("services/*/Dockerfile"))  # no second recipe to drift from it


@pytest.mark.parametrize("name", list(ALL_SERVICES))
def test_build_target_and_args_select_the_service(name: str) -> None:
    build, built = ALL_SERVICES[name]["build"], image(name)
    model_builds = [run for run in built.runs if ".build.build_models" in run]
    if name in MODALITY_CONTAINERS:
        assert build["target"] == "modality" and build["args"]["MODALITY"] == name
        assert build["args"]["PORT"] == str(listen_port(name))
        repository = built.env[ENV_MODEL_REPOSITORY]
        # One RUN builds the models, without PyTorch: the trained text models come from models/.
        assert len(model_builds) == 1 and "torch" not in model_builds[0]
        commands = [c.strip() for c in model_builds[0].split(";")]
        assert f'python -m "services.{name}.build.build_models" --repository {repository}' in commands
        assert model_builds[0].startswith("set -e;") or len(commands) == 1  # a failed build fails the image
        assert SERVICES[name]["environment"][ENV_MODEL_REPOSITORY] == repository
    else:  # the router lanes and the credentials init container: the router image, no models
        assert build["target"] == "router" and "args" not in build
        assert model_builds == [] and ENV_MODEL_REPOSITORY not in built.env


@pytest.mark.parametrize("name", list(SERVICES))
def test_ports_agree_everywhere(name: str) -> None:
    port = listen_port(name)
    if name in OTHER_PORT_CONTAINERS:  # the router image on another port: compose overrides the health probe
        assert SERVICES[name]["healthcheck"]["test"][-1] == f"127.0.0.1:{port}"
    else:
        built = image(name)
        assert built.expose == [str(port)]
        assert built.env[ENV_LISTEN] == f"0.0.0.0:{port}"
        assert built.healthcheck == ["python", "-m", "services.common.healthcheck", f"127.0.0.1:{port}"]
    published = [str(p) for p in SERVICES[name].get("ports", [])] + [str(p) for p in SERVICES[name].get("expose", [])]
    assert any(p == str(port) or p.endswith(f":{port}") for p in published)


@pytest.mark.parametrize("name", list(SERVICES))
def test_only_router_ports_are_published_and_only_on_loopback(name: str) -> None:
    ports = [str(p) for p in SERVICES[name].get("ports", [])]
    if name not in ROUTERS:
        assert ports == []  # internal: reachable on the compose network only
        return
    env = SERVICES[name]["environment"]
    allowed = {str(listen_port(name))}
    if env.get(ENV_ADMIN_LISTEN, "off") != "off":
        allowed.add(env[ENV_ADMIN_LISTEN].rpartition(":")[2])
    metrics = env["AUDITMESH_METRICS_LISTEN"].rpartition(":")[2]
    for published in ports:
        host_ip, host_port, container_port = published.split(":")
        assert host_ip == "127.0.0.1", published  # the demo keys must not reach a network
        assert host_port == container_port and container_port in allowed and container_port != metrics
    assert ALL_SERVICES[CREDENTIALS].get("ports") is None


@pytest.mark.parametrize("name", [*MODALITY_CONTAINERS, MATCH])
def test_modality_services_need_the_secrets_and_a_mesh_certificate(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    env = SERVICES[name]["environment"]
    assert env[ENV_SECRET_FILE] and env[ENV_ADMIN_SECRET_FILE]
    assert env[ENV_TLS_CERT_FILE].endswith(f"/{name}.crt") and env[ENV_TLS_KEY_FILE].endswith(f"/{name}.key")
    assert env[ENV_TLS_CLIENT_CA_FILE].endswith("/ca.crt")  # mTLS
    for key, value in env.items():
        monkeypatch.setenv(key, str(value))
    config = load_service_config(ROOT / "config" / f"{name}.yaml")
    assert config.auth.required and config.server.tls is not None and config.server.tls.mutual
    assert SERVICES[name]["depends_on"][CREDENTIALS]["condition"] == "service_completed_successfully"
    credentials = ALL_SERVICES[CREDENTIALS]["command"]
    assert name in credentials and "services.common.mesh_credentials" in credentials


@pytest.mark.parametrize("name", ROUTERS)
def test_routers_present_the_secret_and_a_client_certificate(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    env = SERVICES[name]["environment"]
    for key, value in env.items():
        monkeypatch.setenv(key, str(value))
    config = load_router_config(ROOT / "config" / "router.yaml")
    tls = config.internal.tls
    assert tls is not None and tls.cert_file.endswith("/router.crt") and tls.ca_file.endswith("/ca.crt")
    assert env[ENV_SECRET_FILE] == SERVICES["text"]["environment"][ENV_SECRET_FILE]
    assert config.allow_demo_keys  # compose binds 0.0.0.0 inside the container; the host sees loopback only
    assert (config.admin_listen != "") == (name == "router")  # one lane serves the admin API


def test_image_containers_yield_the_cpu_to_text_and_the_routers() -> None:
    """Like the launcher's `placement` (docs/deployment.md "CPU placement"): no container is pinned, and vision and
    OCR carry a far lower CPU weight than text and the interactive router (default 1024)."""
    assert not any("cpuset" in service for service in SERVICES.values())
    for image in ("vision", "ocr"):
        assert SERVICES[image]["cpu_shares"] * 10 <= SERVICES["text"].get("cpu_shares", 1024)
        assert SERVICES[image]["cpu_shares"] * 10 <= SERVICES["router"].get("cpu_shares", 1024)


def test_router_lanes_share_the_policy_store_volume() -> None:
    volumes = [set(SERVICES[name].get("volumes", [])) for name in ROUTERS]
    shared = set.intersection(*volumes)
    assert any(v.endswith(":/app/var") for v in shared), volumes  # lifecycle.store_path is var/... under /app
    assert load_router_config(ROOT / "config/router.yaml").lifecycle.store_path.startswith("var/")


@pytest.mark.parametrize("name", list(SERVICES))
def test_metrics_endpoint_listens_on_all_interfaces_and_is_exposed(name: str) -> None:
    listen = SERVICES[name]["environment"]["AUDITMESH_METRICS_LISTEN"]
    assert listen.startswith("0.0.0.0:")  # the config files' 127.0.0.1 would be unreachable from Prometheus
    assert listen.rpartition(":")[2] in [str(p) for p in SERVICES[name]["expose"]]  # on the compose network only


@pytest.mark.parametrize("name", ROUTERS)
def test_router_upstreams_point_at_the_modality_containers(name: str) -> None:
    env = SERVICES[name]["environment"]
    for modality, variable in ENV_UPSTREAM_URL.items():
        assert env[variable] == f"{modality}:{listen_port(modality)}"
        assert modality in SERVICES[name]["depends_on"]


def test_only_env_names_the_code_reads() -> None:
    used = {key for service in SERVICES.values() for key in service.get("environment", {})}
    assert used <= KNOWN_ENV, used - KNOWN_ENV
    for name in SERVICES:
        baked = {key for key in image(name).env if key.startswith("AUDITMESH_")}
        assert baked <= KNOWN_ENV, baked - KNOWN_ENV


def test_the_admin_router_and_the_match_service_share_one_bank_store(monkeypatch: pytest.MonkeyPatch) -> None:
    """BankAdmin (the interactive router) writes the file the match service reads: the same path in the same
    volume, seen from each container."""
    def in_volume(name: str, path: str) -> tuple[str, str]:
        for volume in SERVICES[name]["volumes"]:
            source, _, target = volume.partition(":")
            target = target.split(":")[0]
            if path.startswith(target.rstrip("/") + "/"):
                return source, path[len(target.rstrip("/")) + 1:]
        raise AssertionError(f"{name}: {path} is in no volume")

    match_env = SERVICES[MATCH]["environment"]
    for key, value in match_env.items():
        monkeypatch.setenv(key, str(value))
    match_path = "/app/" + load_service_config(ROOT / "config/match.yaml").match.banks_path
    for key in match_env:
        monkeypatch.delenv(key)
    for key, value in SERVICES["router"]["environment"].items():
        monkeypatch.setenv(key, str(value))
    router_path = load_router_config(ROOT / "config/router.yaml").lifecycle.banks_file
    assert router_path is not None and router_path.startswith("/app/")
    assert in_volume("router", router_path) == in_volume(MATCH, match_path)
