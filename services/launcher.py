"""Start the whole mesh on one machine: text, vision and OCR services, then the router.

Each service runs in its own process (as it would in its own container), on loopback. The launcher
waits for each to report SERVING on grpc.health.v1, prints where the router listens, and on Ctrl-C /
SIGTERM stops the router first and the modality services after it, each draining gracefully. If any
service dies, the launcher stops the others and exits non-zero.

When `config/router.yaml` defines ingress lanes (services/router/lanes.py), each lane is its own
router process: the first lane is `router` on the base port, the others `router-<lane>` on the ports
after the modality services (the shipped config: `router-bulk` on 8104).

Each service also serves Prometheus metrics on `metrics_base_port` + the same offset (router 9100,
text 9101, vision 9102, ocr 9103, router-bulk 9104 by default), or none with `--metrics-base-port 0`.
The router's PolicyAdmin API has a port of its own (`--admin-port`, default 8105; served by the first
lane's process).

Internal authentication: the launcher makes a random shared secret and admin secret once per process
(`MESH_SECRET`, `MESH_ADMIN_SECRET`, never printed) and gives them to the services in the environment
(services/common/internal_auth.py): the router sends the secret on its upstream calls; model
load/unload needs the admin secret. `make run` also writes them to var/secrets/ (0600) for an operator.

Used by `make run`, and by the integration tests (`Mesh`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import grpc
import yaml
from grpc_health.v1 import health_pb2, health_pb2_grpc

from services.common.internal_auth import ADMIN_SECRET_HEADER, SECRET_HEADER

MODALITIES = ("text", "vision", "ocr")
ROOT = Path(__file__).resolve().parents[1]
ROUTER = "router"
#: One pair per launcher process, so every `Mesh` it starts (tests start several) shares them.
MESH_SECRET = secrets.token_urlsafe(32)
MESH_ADMIN_SECRET = secrets.token_urlsafe(32)
DEFAULT_ADMIN_PORT = 8105


def router_lanes(config_dir: Path) -> dict[str, tuple[str, ...]]:
    """Lane name -> its QoS classes, from `config_dir/router.yaml`, in order ({} without lanes). The
    router validates the file itself when it starts; this only reads names and classes."""
    data = yaml.safe_load((config_dir / "router.yaml").read_text(encoding="utf-8")) or {}
    return {str(lane["name"]): tuple(str(c) for c in lane.get("classes") or ())
            for lane in data.get("lanes") or [] if isinstance(lane, dict) and "name" in lane}


def mesh_services(config_dir: Path = ROOT / "config") -> tuple[str, ...]:
    """The mesh's processes in port order: router, text, vision, ocr, then `router-<lane>` for every
    lane after the first."""
    return (ROUTER, *MODALITIES, *(f"{ROUTER}-{lane}" for lane in list(router_lanes(config_dir))[1:]))


def free_base_port(count: int = 0) -> int:
    """A port such that it and the next `count - 1` are free on loopback right now (for a `Mesh`);
    `count` 0 = one per process of the shipped mesh (`mesh_services()`) and one for the admin port."""
    count = count or len(mesh_services()) + 1
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
    """The four service processes. Ports: router = base_port, text/vision/ocr = base_port + 1/2/3;
    their /metrics endpoints the same offsets from `metrics_base_port` (0 = no metrics endpoints).
    `output` (e.g. subprocess.DEVNULL) replaces the services' stdout and stderr.
    `isolated_state` (default): the router's policy store and audit log live in a temporary folder of
    this mesh, removed by `stop` — routers sharing a store act as replicas of one configuration, so
    meshes started by tests and benchmarks must not share `var/`; `make run` keeps them in `var/`.
    `admin_port`: the router's PolicyAdmin port (0 = a free loopback port, picked at construction)."""

    base_port: int = 8100
    config_dir: Path = ROOT / "config"
    host: str = "127.0.0.1"
    log_format: str = "text"
    extra_env: dict[str, str] = field(default_factory=dict)
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    metrics_base_port: int = 0
    output: int | None = None
    isolated_state: bool = True
    admin_port: int = 0
    _state_dir: Path | None = field(default=None, init=False, repr=False)
    #: Every process, in port order (see `mesh_services`).
    services: tuple[str, ...] = field(default=(), init=False)
    #: Router service name -> the lane it serves ("" without lanes).
    lanes: dict[str, str] = field(default_factory=dict, init=False)
    _lane_classes: dict[str, tuple[str, ...]] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        self.services = mesh_services(self.config_dir)
        self._lane_classes = router_lanes(self.config_dir)
        names = list(self._lane_classes)
        self.lanes = {ROUTER: names[0] if names else "", **{f"{ROUTER}-{lane}": lane for lane in names[1:]}}
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
        """The router processes: `router` (the first lane, or the only router), then the other lanes."""
        return tuple(self.lanes)

    def port(self, service: str) -> int:
        return self.base_port + self._offset(service)

    def metrics_port(self, service: str) -> int:
        """Where `service` serves /metrics (0 when the mesh runs without metrics endpoints)."""
        return self.metrics_base_port + self._offset(service) if self.metrics_base_port else 0

    def _offset(self, service: str) -> int:
        if service not in self.services:
            raise ValueError(f"unknown service {service!r}; this mesh has {list(self.services)}")
        return self.services.index(service)

    def address(self, service: str) -> str:
        return f"{self.host}:{self.port(service)}"

    def _env(self, service: str) -> dict[str, str]:
        metrics = f"{self.host}:{self.metrics_port(service)}" if self.metrics_base_port else "off"
        env = {**os.environ, "AUDITMESH_LISTEN": self.address(service), "AUDITMESH_METRICS_LISTEN": metrics,
               "PYTHONUNBUFFERED": "1", "AUDITMESH_INTERNAL_SECRET": MESH_SECRET}
        if service in MODALITIES:
            env["AUDITMESH_INTERNAL_ADMIN_SECRET"] = MESH_ADMIN_SECRET
        if service in self.lanes:
            env["AUDITMESH_ADMIN_LISTEN"] = self.admin_address if service == ROUTER else "off"
            if self.lanes[service]:
                env["AUDITMESH_LANE"] = self.lanes[service]
            env.update({f"AUDITMESH_{m.upper()}_URL": self.address(m) for m in MODALITIES})
            if self.isolated_state:
                if self._state_dir is None:
                    self._state_dir = Path(tempfile.mkdtemp(prefix="auditmesh-router-state-"))
                env.update({"AUDITMESH_POLICY_STORE": str(self._state_dir / "policy_store.sqlite"),
                            "AUDITMESH_AUDIT_LOG": str(self._state_dir / "audit.sqlite")})
        env.update(self.extra_env)  # last, so a caller can point the router at other upstreams
        return env

    def start_service(self, service: str) -> None:
        """Start one service process (not waiting for it)."""
        module = ROUTER if service in self.lanes else service
        command = [sys.executable, "-m", "services.router" if module == ROUTER else f"services.{module}.server", "--config", str(self.config_dir / f"{module}.yaml"),
                   "--log-format", self.log_format]
        self.processes[service] = subprocess.Popen(command, cwd=ROOT, env=self._env(service), stdout=self.output,
                                                   stderr=self.output)

    def wait_serving(self, service: str, timeout_s: float = 120.0) -> None:
        """Block until `service` answers SERVING, or raise RuntimeError (its process died or timed out)."""
        deadline = time.monotonic() + timeout_s
        with grpc.insecure_channel(self.address(service)) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            while time.monotonic() < deadline:
                process = self.processes.get(service)
                if process is not None and process.poll() is not None:
                    raise RuntimeError(f"{service} exited with code {process.returncode} while starting (see its log above)")
                try:
                    if stub.Check(health_pb2.HealthCheckRequest(), timeout=1.0).status == health_pb2.HealthCheckResponse.SERVING:
                        return
                except grpc.RpcError:
                    pass
                time.sleep(0.2)
        raise RuntimeError(f"{service} did not become SERVING on {self.address(service)} within {timeout_s:.0f}s")

    def start(self, timeout_s: float = 180.0) -> None:
        """Start the modality services (in parallel), then the routers (one per lane); wait until all serve."""
        for service in MODALITIES:
            self.start_service(service)
        for service in MODALITIES:
            self.wait_serving(service, timeout_s)
        self.start_routers(timeout_s)

    def start_routers(self, timeout_s: float = 180.0) -> None:
        """Start every router process (one per lane) and wait until each serves."""
        for service in self.routers:
            self.start_service(service)
        for service in self.routers:
            self.wait_serving(service, timeout_s)

    def stop_service(self, service: str, timeout_s: float = 30.0) -> int | None:
        """SIGTERM one service and wait for it to drain and exit; returns its exit code."""
        process = self.processes.pop(service, None)
        if process is None:
            return None
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        return process.returncode

    def stop(self) -> None:
        """Routers first (they stop taking requests), then the modality services."""
        for service in (*self.routers, *MODALITIES, *self.processes):
            self.stop_service(service)
        if self._state_dir is not None:
            shutil.rmtree(self._state_dir, ignore_errors=True)
            self._state_dir = None

    def first_exited(self) -> str | None:
        return next((name for name, p in self.processes.items() if p.poll() is not None), None)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m services.launcher",
                                     description="Run the auditmesh mesh (router + text + vision + ocr, and a router "
                                                 "process per extra lane in router.yaml) on loopback until Ctrl-C.")
    parser.add_argument("--config-dir", type=Path, default=ROOT / "config",
                        help="folder with router.yaml, text.yaml, vision.yaml, ocr.yaml (default: ./config)")
    parser.add_argument("--base-port", type=int, default=8100,
                        help="router port; text, vision, ocr listen on the next three, further router lanes "
                             "on the ports after them (default: 8100)")
    parser.add_argument("--metrics-base-port", type=int, default=9100,
                        help="router /metrics port; the others follow in the same order; 0 = none (default: 9100)")
    parser.add_argument("--admin-port", type=int, default=DEFAULT_ADMIN_PORT,
                        help=f"the router's PolicyAdmin port, apart from the public one (default: {DEFAULT_ADMIN_PORT})")
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


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    mesh = Mesh(args.base_port, args.config_dir, log_format=args.log_format, metrics_base_port=args.metrics_base_port,
                isolated_state=False, admin_port=args.admin_port)  # `make run`: the policy store and audit log persist in var/
    write_secrets(ROOT / "var" / "secrets")
    stop = False

    def request_stop(signum: int, frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    try:
        mesh.start()
        metrics = ("Metrics: " + ", ".join(f"{s} http://{mesh.host}:{mesh.metrics_port(s)}/metrics" for s in mesh.services)
                   + ".\n" if mesh.metrics_base_port else "")
        lanes = "".join(f"  {service} (lane {lane}) on {mesh.address(service)}\n"
                        for service, lane in mesh.lanes.items() if lane)
        print(f"\nauditmesh is serving: router on {mesh.address('router')} "
              f"(text {mesh.port('text')}, vision {mesh.port('vision')}, ocr {mesh.port('ocr')}).\n"
              f"{'Router lanes (each tenant calls the lane of its QoS class):' + chr(10) + lanes if lanes else ''}{metrics}"
              f"PolicyAdmin API on {mesh.admin_address}; the modality services' internal secrets are in var/secrets/.\n"
              f"Try: .venv/bin/auditmesh moderate --router {mesh.address('router')} --tenant-key demo-acme-key "
              f"--text 'hello there'\nCtrl-C stops it.\n", flush=True)
        while not stop:
            dead = mesh.first_exited()
            if dead is not None:
                print(f"launcher: {dead} exited unexpectedly; stopping the mesh", file=sys.stderr)
                return 1
            time.sleep(0.5)
        return 0
    except RuntimeError as error:
        print(f"launcher: {error}", file=sys.stderr)
        return 1
    finally:
        mesh.stop()


if __name__ == "__main__":
    raise SystemExit(main())
