"""Start the whole mesh on one machine: text, vision, OCR and match services, then the router, and keep it up.

Each service runs in its own process (as it would in its own container), on loopback. The launcher
waits for each to report SERVING on grpc.health.v1 and prints where the router listens. Then it
supervises: a child that exits (a crash, kill -9, an OOM kill) is logged (which one, its exit code or
signal, when the next attempt comes) and started again with exponential backoff (services/supervise.py:
0.5 s, doubling, capped at 30 s, reset after 60 s up; `--restart-*` flags), while the others keep
serving. Only SIGINT / SIGTERM stop the mesh: the routers first, then the modality services, each sent
SIGTERM, given its `server.grace_period_s` (plus a margin) to drain, then SIGKILLed. A service that
fails while the mesh is first starting (a bad config, a port in use) stops the launcher with exit code 1.

CPU placement: each child starts on the CPUs and at the niceness its config's `placement` block
says (services/common/placement.py; the shipped configs run every service on every CPU, the routers
and text at full priority, vision and OCR at nice 19), logged as "<service> runs on all CPUs, nice 19";
`--no-placement` turns it off.

Every child's command line says how it runs, ports and files included (`--listen`, `--metrics-listen`,
the router's `--lane` and `--<modality>-url`, ...), and the launcher logs it: copy it to run one
service by hand.

When `config/router.yaml` defines ingress lanes (services/router/lanes.py), each lane is its own
router process: the first lane is `router` on the base port, the others `router-<lane>` on the ports
after the modality services (the shipped config: `router-bulk` on 8104).
`--router-replicas N` runs N processes per lane: replicas `router.2`, `router-bulk.2`, ... from the base
port + 10 (the shipped config with N = 2: 8110 and 8111; metrics 9110, 9111), sharing the policy store;
give them AUDITMESH_REDIS_URL (shared quotas) and clients every address.

Each service also serves Prometheus metrics on `metrics_base_port` + the same offset (router 9100,
text 9101, vision 9102, ocr 9103, router-bulk 9104 by default), or none with `--metrics-base-port 0`.
The router's PolicyAdmin API has a port of its own (`--admin-port`, default 8105; the first lane's
process serves it, `--admin-listen` on its command line; the other lanes get `--admin-listen off`).

Internal authentication: the launcher makes a random shared secret and admin secret once per process
(`MESH_SECRET`, `MESH_ADMIN_SECRET`) and hands them to the services in the environment, never on a
command line (services/common/internal_auth.py): the router sends the secret on its upstream calls;
model load/unload needs the admin secret. `make run` also writes them to var/secrets/ (0600).

Used by `make run`, and by the integration tests (`Mesh`).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import grpc
import yaml
from grpc_health.v1 import health_pb2, health_pb2_grpc

from services.common.config import ConfigError, load_dataclass
from services.common.internal_auth import ADMIN_SECRET_HEADER, ENV_ADMIN_SECRET, ENV_SECRET, SECRET_HEADER
from services.common.logs import configure_logging
from services.common.placement import Placement, placement_command, usable_cpus
from services.common.service_config import ServerConfig
from services.common.serving.modality_config import ENV_BANKS_DSN, ENV_BANKS_PATH
from services.router.config import ENV_POSTGRES_DSN
from services.supervise import RestartPolicy, Supervisor, describe_exit

MODALITIES = ("text", "vision", "ocr")
#: The known-content matching service (services/match/; config/match.yaml): started beside the modalities.
MATCH = "match"
ROOT = Path(__file__).resolve().parents[1]
ROUTER = "router"
#: One pair per launcher process, so every `Mesh` it starts (tests start several) shares them.
MESH_SECRET = secrets.token_urlsafe(32)
MESH_ADMIN_SECRET = secrets.token_urlsafe(32)
DEFAULT_ADMIN_PORT = 8105
#: The match service listens on the base port + this (8106: past the admin port's 8105).
MATCH_PORT_OFFSET = 6
#: Router replicas (`--router-replicas`) listen from the base port + this (8110, 8111, ...), past the
#: admin port and the match service.
REPLICA_PORT_OFFSET = 10
#: Seconds a stopping service gets beyond its own `grace_period_s` (closing models, flushing the audit
#: log) before it is SIGKILLed.
STOP_MARGIN_S = 5.0
#: Environment variables a caller of `Mesh` may set in `extra_env` that are really a service's
#: settings: the launcher passes them on as these flags, so the command line shows them.
ROUTER_FLAGS = {"AUDITMESH_LISTEN": "--listen", "AUDITMESH_METRICS_LISTEN": "--metrics-listen",
                "AUDITMESH_LANE": "--lane", "AUDITMESH_TEXT_URL": "--text-url",
                "AUDITMESH_VISION_URL": "--vision-url", "AUDITMESH_OCR_URL": "--ocr-url",
                "AUDITMESH_TENANTS_FILE": "--tenants-file", "AUDITMESH_POLICIES_DIR": "--policies-dir",
                "AUDITMESH_POLICY_STORE": "--policy-store", "AUDITMESH_AUDIT_LOG": "--audit-log",
                "AUDITMESH_ADMIN_KEYS_FILE": "--admin-keys-file",
                "AUDITMESH_ADMIN_LISTEN": "--admin-listen", "AUDITMESH_MATCH_URL": "--match-url"}
MODALITY_FLAGS = {"AUDITMESH_LISTEN": "--listen", "AUDITMESH_METRICS_LISTEN": "--metrics-listen",
                  "AUDITMESH_MODEL_REPOSITORY": "--model-repository"}

log = logging.getLogger("services.launcher")


def router_lanes(config_dir: Path) -> dict[str, tuple[str, ...]]:
    """Lane name -> its QoS classes, from `config_dir/router.yaml`, in order ({} without lanes). The
    router validates the file itself when it starts; this only reads names and classes."""
    data = yaml.safe_load((config_dir / "router.yaml").read_text(encoding="utf-8")) or {}
    return {str(lane["name"]): tuple(str(c) for c in lane.get("classes") or ())
            for lane in data.get("lanes") or [] if isinstance(lane, dict) and "name" in lane}


def mesh_services(config_dir: Path = ROOT / "config", router_replicas: int = 1) -> tuple[str, ...]:
    """The mesh's processes in port order: router, text, vision, ocr, then `router-<lane>` for every
    lane after the first, the match service, then, with `router_replicas` N > 1, replicas 2..N of
    each router process (`router.2`, `router-bulk.2`, ...)."""
    routers = (ROUTER, *(f"{ROUTER}-{lane}" for lane in list(router_lanes(config_dir))[1:]))
    replicas = tuple(f"{router}.{n}" for n in range(2, router_replicas + 1) for router in routers)
    return (ROUTER, *MODALITIES, *routers[1:], MATCH, *replicas)


def port_span(config_dir: Path = ROOT / "config", router_replicas: int = 1) -> int:
    """How many consecutive ports from the base port a mesh of this config uses (its highest offset + 1):
    the count to give `free_base_port`, and the distance between ports and metrics ports in tests."""
    lanes = len(router_lanes(config_dir)) or 1
    span = max(len(mesh_services(config_dir, 1)) + 1, MATCH_PORT_OFFSET + 1)
    return max(span, REPLICA_PORT_OFFSET + lanes * (router_replicas - 1)) if router_replicas > 1 else span


def replica_of(service: str) -> str:
    """The router process a replica copies (`router-bulk.2` -> `router-bulk`); a name without a replica
    number is its own."""
    base, _, number = service.rpartition(".")
    return base if base and number.isdigit() else service


def free_base_port(count: int = 0) -> int:
    """A port such that it and the next `count - 1` are free on loopback right now (for a `Mesh`);
    `count` 0 = the ports of the shipped mesh (`port_span()`)."""
    count = count or port_span()
    for _ in range(200):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            base = int(probe.getsockname()[1])
        if base + count >= 65535:
            continue
        with contextlib.ExitStack() as stack:
            try:
                for port in range(base, base + count):
                    stack.enter_context(socket.socket()).bind(("127.0.0.1", port))
            except OSError:
                continue
            return base
    raise RuntimeError("no block of free loopback ports found")


@dataclass
class Mesh:
    """The mesh's service processes. Ports: router = base_port, text/vision/ocr = base_port + 1/2/3;
    their /metrics endpoints the same offsets from `metrics_base_port` (0 = no metrics endpoints).
    `output` (e.g. subprocess.DEVNULL) replaces the services' stdout and stderr.
    `extra_env` goes into every service's environment; the AUDITMESH_* settings in it that a service
    has a flag for (ROUTER_FLAGS, MODALITY_FLAGS: e.g. AUDITMESH_TEXT_URL to point the router at
    another text service) are passed as that flag instead, overriding the mesh's own value.
    State: the router's policy store and audit log live in `state_dir` when given; else, with
    `isolated_state` (default), in a temporary folder of this mesh, removed by `stop` (routers sharing
    a store act as replicas of one configuration, so meshes started by tests and benchmarks must not
    share `var/`); else where router.yaml says (`var/`, for `make run`).
    `own_sessions`: each service in a session (process group) of its own, so a terminal's Ctrl-C
    reaches only the launcher, which then stops them in order.
    `place`: start each process on the CPUs and at the niceness of its config's `placement` block
    (`placement()`; services/common/placement.py).
    `admin_port`: the router's PolicyAdmin port (0 = a free loopback port, picked at construction).
    `router_replicas`: how many processes serve each router lane (replicas 2..N from base_port +
    REPLICA_PORT_OFFSET, sharing the state folder; only the first serves the admin API). Run them with
    AUDITMESH_REDIS_URL in `extra_env` so tenants' quotas hold across them."""

    base_port: int = 8100
    config_dir: Path = ROOT / "config"
    host: str = "127.0.0.1"
    log_format: str = "text"
    extra_env: dict[str, str] = field(default_factory=dict)
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    metrics_base_port: int = 0
    output: int | None = None
    isolated_state: bool = True
    state_dir: Path | None = None
    own_sessions: bool = False
    #: Apply each config's `placement` (CPUs, niceness) to its process; False = every process anywhere.
    place: bool = True
    admin_port: int = 0
    router_replicas: int = 1
    _temp_state: Path | None = field(default=None, init=False, repr=False)
    #: Every process, in port order (see `mesh_services`).
    services: tuple[str, ...] = field(default=(), init=False)
    #: Router service name -> the lane it serves ("" without lanes).
    lanes: dict[str, str] = field(default_factory=dict, init=False)
    _lane_classes: dict[str, tuple[str, ...]] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.router_replicas < 1:
            raise ValueError(f"router_replicas must be >= 1, got {self.router_replicas}")
        self.services = mesh_services(self.config_dir, self.router_replicas)
        self._lane_classes = router_lanes(self.config_dir)
        names = list(self._lane_classes)
        lanes = {ROUTER: names[0] if names else "", **{f"{ROUTER}-{lane}": lane for lane in names[1:]}}
        self.lanes = {**lanes, **{service: lanes[replica_of(service)] for service in self.services
                                  if replica_of(service) != service}}
        if not self.admin_port:
            self.admin_port = free_base_port(1)

    @property
    def admin_address(self) -> str:
        """Where the router serves the PolicyAdmin API."""
        return f"{self.host}:{self.admin_port}"

    @staticmethod
    def internal_metadata(admin: bool = False) -> list[tuple[str, str]]:
        """Call metadata that authenticates to the modality services' KServe ports (`admin`: for
        RepositoryModelLoad / Unload)."""
        return [(ADMIN_SECRET_HEADER, MESH_ADMIN_SECRET)] if admin else [(SECRET_HEADER, MESH_SECRET)]

    def router_for(self, qos_class: str) -> str:
        """The router service (lane) that serves tenants of `qos_class` (`router` without lanes)."""
        for service, lane in self.lanes.items():
            if not lane or qos_class in self._lane_classes[lane]:
                return service
        raise ValueError(f"no router lane serves QoS class {qos_class!r}")

    @property
    def routers(self) -> tuple[str, ...]:
        """The router processes: `router` (the first lane, or the only router), the other lanes, then
        their replicas."""
        return tuple(self.lanes)

    def replicas(self, router: str) -> tuple[str, ...]:
        """`router` and its replicas, in port order."""
        return tuple(service for service in self.lanes if replica_of(service) == router)

    def port(self, service: str) -> int:
        return self.base_port + self._offset(service)

    def metrics_port(self, service: str) -> int:
        """Where `service` serves /metrics (0 when the mesh runs without metrics endpoints)."""
        return self.metrics_base_port + self._offset(service) if self.metrics_base_port else 0

    def _offset(self, service: str) -> int:
        if service not in self.services:
            raise ValueError(f"unknown service {service!r}; this mesh has {list(self.services)}")
        if service == MATCH:
            return MATCH_PORT_OFFSET
        if replica_of(service) != service:  # replicas from base + REPLICA_PORT_OFFSET: clear of the admin port
            replicas = [s for s in self.services if replica_of(s) != s]
            return REPLICA_PORT_OFFSET + replicas.index(service)
        return self.services.index(service)

    def address(self, service: str) -> str:
        return f"{self.host}:{self.port(service)}"

    def _module(self, service: str) -> str:
        return ROUTER if service in self.lanes else service

    def _settings(self, service: str) -> dict[str, str]:
        """Flag -> value for `service`: the mesh's addresses (and the router's state files), then what
        `extra_env` says."""
        self._offset(service)  # an unknown service is a ValueError here, not a process that fails
        settings = {"--listen": self.address(service),
                    "--metrics-listen": f"{self.host}:{self.metrics_port(service)}" if self.metrics_base_port else "off"}
        flags = MODALITY_FLAGS
        if service in self.lanes:
            flags = ROUTER_FLAGS
            if self.lanes[service]:
                settings["--lane"] = self.lanes[service]
            settings.update({f"--{m}-url": self.address(m) for m in (*MODALITIES, MATCH)})
            settings["--admin-listen"] = self.admin_address if service == ROUTER else "off"
            state = self._state_folder()
            if state is not None:
                settings.update({"--policy-store": str(state / "policy_store.sqlite"),
                                 "--audit-log": str(state / "audit.sqlite")})
        settings.update({flags[name]: value for name, value in self.extra_env.items() if name in flags})
        return settings

    def _state_folder(self) -> Path | None:
        if self.state_dir is not None:
            return self.state_dir
        if not self.isolated_state:
            return None
        if self._temp_state is None:
            self._temp_state = Path(tempfile.mkdtemp(prefix="auditmesh-router-state-"))
        return self._temp_state

    def command(self, service: str) -> list[str]:
        """The full command line of `service`: run it from the repository root to start it by hand."""
        module = self._module(service)
        entry = "services.router" if module == ROUTER else f"services.{module}.server"
        command = [sys.executable, "-m", entry, "--config", str(self.config_dir / f"{module}.yaml"),
                   "--log-format", self.log_format]
        for flag, value in self._settings(service).items():
            command += [flag, value]
        return command

    def grace_period_s(self, service: str) -> float:
        """`server.grace_period_s` from the service's config file (how long it drains on SIGTERM)."""
        path = self.config_dir / f"{self._module(service)}.yaml"
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        server = data.get("server") if isinstance(data, dict) else None
        value = server.get("grace_period_s") if isinstance(server, dict) else None
        return float(value) if isinstance(value, (int, float)) else ServerConfig.grace_period_s

    def placement(self, service: str) -> Placement:
        """The `placement` block of the service's config file (CPUs, niceness; services/common/placement.py);
        the default (anywhere, nice 0) without one, or when the mesh runs with `place=False`. A bad block
        is a ConfigError naming the file and key."""
        if not self.place:
            return Placement()
        path = self.config_dir / f"{self._module(service)}.yaml"
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        block = data.get("placement") if isinstance(data, dict) else None
        if block is None:
            return Placement()
        try:
            return load_dataclass(Placement, block, str(path), "placement")
        except ConfigError:
            raise
        except (TypeError, ValueError) as error:
            raise ConfigError(str(path), "placement", str(error)) from None

    def start_service(self, service: str) -> subprocess.Popen[bytes]:
        """Start one service process (not waiting for it), on the CPUs and at the niceness its config's
        `placement` says (`taskset` / `nice` before the command: inherited by every thread it starts)."""
        env = self.environment(service)
        placement, usable = self.placement(service), usable_cpus()
        if placement != Placement():
            log.info("%s runs on %s", service, placement.describe(usable))
        process = subprocess.Popen([*placement_command(placement, usable), *self.command(service)], cwd=ROOT, env=env,
                                   stdout=self.output, stderr=self.output, start_new_session=self.own_sessions)
        self.processes[service] = process
        return process

    def environment(self, service: str) -> dict[str, str]:
        """The environment `service` starts with: this process's, the mesh's secrets, `extra_env`, and the
        match service's bank store (beside this mesh's state; PostgreSQL when the routers use it)."""
        env = {**os.environ, "PYTHONUNBUFFERED": "1", ENV_SECRET: MESH_SECRET}  # secrets: never on a command line
        if service in (*MODALITIES, MATCH):
            env[ENV_ADMIN_SECRET] = MESH_ADMIN_SECRET
        env.update(self.extra_env)
        state = self._state_folder()
        # a bank file named on purpose: the routers write it (lifecycle.banks_path), even beside PostgreSQL
        explicit_file = bool(self.extra_env.get(ENV_BANKS_PATH) or os.environ.get(ENV_BANKS_PATH))
        if service == MATCH and state is not None and ENV_BANKS_PATH not in self.extra_env:
            env[ENV_BANKS_PATH] = str(state / "banks.sqlite")  # each mesh's own banks, beside its policy store
        if service == MATCH and env.get(ENV_POSTGRES_DSN) and not env.get(ENV_BANKS_DSN) and not explicit_file:
            # routers on PostgreSQL write their banks there (lifecycle.banks_path ""): the match service reads them
            env[ENV_BANKS_DSN] = env[ENV_POSTGRES_DSN]
        return env

    def wait_serving(self, service: str, timeout_s: float = 120.0) -> None:
        """Block until `service` answers SERVING, or raise RuntimeError (its process died or timed out)."""
        deadline = time.monotonic() + timeout_s
        with grpc.insecure_channel(self.address(service)) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            while time.monotonic() < deadline:
                process = self.processes.get(service)
                if process is not None and process.poll() is not None:
                    raise RuntimeError(f"{service} exited with code {process.returncode} while starting (see its log above)")
                if serving(stub):
                    return
                time.sleep(0.2)
        raise RuntimeError(f"{service} did not become SERVING on {self.address(service)} within {timeout_s:.0f}s")

    def start(self, timeout_s: float = 180.0) -> None:
        """Start the modality and match services (in parallel), then the routers (one per lane); wait until
        all serve."""
        self.start_services((*MODALITIES, MATCH), timeout_s)
        self.start_routers(timeout_s)

    def start_routers(self, timeout_s: float = 180.0) -> None:
        """Start every router process (one per lane) and wait until each serves."""
        self.start_services(self.routers, timeout_s)

    def start_services(self, services: Sequence[str], timeout_s: float = 180.0) -> None:
        """Start `services` at once (they load in parallel), then wait until each serves (`wait_serving`)."""
        for service in services:
            self.start_service(service)
        for service in services:
            self.wait_serving(service, timeout_s)

    def stop_service(self, service: str, timeout_s: float | None = None) -> int | None:
        """SIGTERM one service and wait for it to drain and exit (`timeout_s`, default its grace period
        plus STOP_MARGIN_S, then SIGKILL); returns its exit code."""
        return self.stop_services([service], timeout_s).get(service)

    def stop_services(self, services: Sequence[str], timeout_s: float | None = None) -> dict[str, int]:
        """SIGTERM these services at once, wait for each (as `stop_service`), SIGKILL the late; exit codes."""
        running = {s: p for s in services if (p := self.processes.pop(s, None)) is not None}
        for process in running.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        codes = {}
        for service, process in running.items():
            limit = timeout_s if timeout_s is not None else self.grace_period_s(service) + STOP_MARGIN_S
            try:
                codes[service] = process.wait(limit)
            except subprocess.TimeoutExpired:
                log.warning("%s did not stop within %.1f s of SIGTERM: SIGKILL", service, limit)
                process.kill()
                codes[service] = process.wait()
        return codes

    def stop(self) -> None:
        """Routers first (they stop taking requests), then the modality services, then anything else."""
        self.stop_services(self.routers)
        self.stop_services(MODALITIES)
        self.stop_services(list(self.processes))
        if self._temp_state is not None:
            shutil.rmtree(self._temp_state, ignore_errors=True)
            self._temp_state = None

    def first_exited(self) -> str | None:
        return next((name for name, p in self.processes.items() if p.poll() is not None), None)


def serving(stub: health_pb2_grpc.HealthStub, timeout_s: float = 1.0) -> bool:
    """True when the service behind `stub` answers SERVING now."""
    try:
        response = stub.Check(health_pb2.HealthCheckRequest(), timeout=timeout_s)
    except grpc.RpcError:
        return False
    return bool(response.status == health_pb2.HealthCheckResponse.SERVING)


def supervise(mesh: Mesh, supervisor: Supervisor, should_stop: Callable[[], bool], *, poll_s: float = 0.1) -> None:
    """Keep `mesh`'s children running until `should_stop()`: report each exit to `supervisor`, log
    its decision, start again the children it says are due, and log when a restarted child serves
    again. The decisions are all the supervisor's (services/supervise.py); this only handles processes."""
    recovering = _Recovering(mesh)
    try:
        while not should_stop():
            for service, process in list(mesh.processes.items()):
                returncode = process.poll()
                if returncode is None:
                    continue
                del mesh.processes[service]  # reaped: its Popen is done with
                recovering.forget(service)
                restart = supervisor.exited(service, returncode)
                if restart is not None:
                    log.error("%s (pid was %d)", restart.describe(), process.pid)
            for service in supervisor.due():
                if should_stop():
                    break
                supervisor.started(service)
                try:
                    process = mesh.start_service(service)
                except OSError as error:  # fork or exec failed (no memory, too many processes): try again later
                    restart = supervisor.exited(service, 127)
                    if restart is not None:
                        log.error("could not start %s (%s): %s", service, error, restart.describe())
                    continue
                recovering.add(service)
                log.warning("restarted %s (pid %d): %s", service, process.pid, shlex.join(mesh.command(service)))
            recovering.check()
            time.sleep(poll_s)
    finally:
        recovering.close()


class _Recovering:
    """Restarted children not yet SERVING: `check` logs each one that serves again, and how soon."""

    CHECK_EVERY_S = 0.25

    def __init__(self, mesh: Mesh) -> None:
        self.mesh = mesh
        self.waiting: dict[str, tuple[float, grpc.Channel]] = {}
        self.last_check = 0.0

    def add(self, service: str) -> None:
        self.forget(service)
        # Reconnect quickly: the service is still starting, and gRPC's default backoff (1 s, growing)
        # would report it serving seconds late.
        channel = grpc.insecure_channel(self.mesh.address(service), options=[
            ("grpc.initial_reconnect_backoff_ms", 100), ("grpc.max_reconnect_backoff_ms", 200)])
        self.waiting[service] = (time.monotonic(), channel)

    def forget(self, service: str) -> None:
        entry = self.waiting.pop(service, None)
        if entry is not None:
            entry[1].close()

    def check(self) -> None:
        if not self.waiting or time.monotonic() - self.last_check < self.CHECK_EVERY_S:
            return
        self.last_check = time.monotonic()
        for service, (started, channel) in list(self.waiting.items()):
            if serving(health_pb2_grpc.HealthStub(channel), timeout_s=0.1):
                log.info("%s is SERVING again, %.1f s after its restart", service, time.monotonic() - started)
                self.forget(service)

    def close(self) -> None:
        for service in list(self.waiting):
            self.forget(service)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    defaults = RestartPolicy()
    parser = argparse.ArgumentParser(prog="python -m services.launcher",
                                     description="Run the auditmesh mesh (router + text + vision + ocr + match, and a "
                                                 "router process per extra lane in router.yaml) on loopback until Ctrl-C "
                                                 "or SIGTERM, restarting any service that exits.")
    parser.add_argument("--config-dir", type=Path, default=ROOT / "config",
                        help="folder with router.yaml, text.yaml, vision.yaml, ocr.yaml (default: ./config)")
    parser.add_argument("--base-port", type=int, default=8100,
                        help="router port; text, vision, ocr listen on the next three, further router lanes "
                             "on the ports after them, match on this + 6 (default: 8100)")
    parser.add_argument("--metrics-base-port", type=int, default=9100,
                        help="router /metrics port; the others follow in the same order; 0 = none (default: 9100)")
    parser.add_argument("--admin-port", type=int, default=DEFAULT_ADMIN_PORT,
                        help=f"the router's PolicyAdmin port, apart from the public one (default: {DEFAULT_ADMIN_PORT})")
    parser.add_argument("--state-dir", type=Path, default=None,
                        help="folder for the routers' policy store and audit log (default: the paths in "
                             "router.yaml, var/)")
    parser.add_argument("--restart-initial-s", type=float, default=defaults.initial_delay_s,
                        help=f"wait before restarting a service that exited (default: {defaults.initial_delay_s})")
    parser.add_argument("--restart-max-s", type=float, default=defaults.max_delay_s,
                        help="the wait doubles with each consecutive crash, up to this "
                             f"(default: {defaults.max_delay_s})")
    parser.add_argument("--restart-reset-s", type=float, default=defaults.reset_after_s,
                        help="a service up this long before it died is restarted after the initial wait again "
                             f"(default: {defaults.reset_after_s})")
    parser.add_argument("--router-replicas", type=int, default=1,
                        help="router processes per lane (replicas 2..N listen on the ports after the others; "
                             "set AUDITMESH_REDIS_URL so tenants' quotas hold across them; default: 1)")
    parser.add_argument("--no-placement", action="store_true",
                        help="ignore the configs' `placement` blocks: every service on every CPU at nice 0")
    parser.add_argument("--log-format", default="text", choices=["text", "json"])
    return parser.parse_args(argv)


def write_secrets(folder: Path) -> None:
    """The mesh's internal secrets as files only their owner can read (for an operator's KServe calls)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, value in (("internal.secret", MESH_SECRET), ("internal-admin.secret", MESH_ADMIN_SECRET)):
        path = folder / name
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as file:
            file.write(value + "\n")
        os.chmod(path, 0o600)


class _StopRequested(Exception):
    """SIGINT / SIGTERM while the mesh is still starting."""


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        policy = RestartPolicy(initial_delay_s=args.restart_initial_s, max_delay_s=args.restart_max_s,
                               reset_after_s=args.restart_reset_s)
    except ValueError as error:
        print(f"launcher: {error}", file=sys.stderr)
        return 2
    if args.router_replicas < 1:
        print(f"launcher: --router-replicas must be >= 1, got {args.router_replicas}", file=sys.stderr)
        return 2
    configure_logging("launcher", "info", args.log_format)
    # `make run`: without --state-dir the policy store and audit log persist in var/.
    mesh = Mesh(args.base_port, args.config_dir, log_format=args.log_format, metrics_base_port=args.metrics_base_port,
                isolated_state=False, state_dir=args.state_dir, own_sessions=True, place=not args.no_placement,
                admin_port=args.admin_port, router_replicas=args.router_replicas)
    write_secrets(ROOT / "var" / "secrets")
    stop = False

    def stop_while_starting(signum: int, frame: object) -> None:
        raise _StopRequested(signal.Signals(signum).name)

    def request_stop(signum: int, frame: object) -> None:
        nonlocal stop
        stop = True

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, stop_while_starting)
    try:
        for service in mesh.services:
            log.info("%s: %s", service, shlex.join(mesh.command(service)))
        mesh.start()
        supervisor = Supervisor(policy)
        for service in mesh.services:
            supervisor.started(service)
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, request_stop)
        _print_banner(mesh)
        supervise(mesh, supervisor, lambda: stop)
        supervisor.stop()
        log.info("stopping the mesh: routers, then the modality services")
        return 0
    except _StopRequested as why:
        log.info("%s while starting: stopping the mesh", why)
        return 0
    except RuntimeError as error:
        log.error("%s", error)
        return 1
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the orderly stop short
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        mesh.stop()


def _print_banner(mesh: Mesh) -> None:
    metrics = ("Metrics: " + ", ".join(f"{s} http://{mesh.host}:{mesh.metrics_port(s)}/metrics" for s in mesh.services)
               + ".\n" if mesh.metrics_base_port else "")
    lanes = "".join(f"  {service} (lane {lane}) on {mesh.address(service)}\n"
                    for service, lane in mesh.lanes.items() if lane)
    print(f"\nauditmesh is serving: router on {mesh.address('router')} "
          f"(text {mesh.port('text')}, vision {mesh.port('vision')}, ocr {mesh.port('ocr')}).\n"
          f"{'Router lanes (each tenant calls the lane of its QoS class):' + chr(10) + lanes if lanes else ''}{metrics}"
          f"PolicyAdmin API on {mesh.admin_address}; the modality services' internal secrets are in var/secrets/.\n"
          f"Try: .venv/bin/auditmesh moderate --router {mesh.address('router')} --tenant-key demo-acme-key "
          f"--text 'hello there'\nA service that exits is restarted; Ctrl-C stops the mesh.\n", flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
