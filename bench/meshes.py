"""Starting the real services for a benchmark: the auditmesh mesh, or the unbatched baseline's services.

Both use `services.launcher.Mesh` (one process per service, on free loopback ports):

* `auditmesh`: router + text + vision + OCR with the shipped configs from `config/`, and a temporary
  tenants file with the benchmark's tenants (`bench/tenants.py`).
* `unbatched`: text + vision + OCR only (no router), from copies of the shipped configs with
  `batching.max_batch_size: 1`, `max_concurrency: 1` and no urgent slot (`urgent_concurrency: 0`):
  the same models and threads, one item per model call, one call at a time.

Example::

    with running_mesh(auditmesh_mesh(tmp, tenants), with_router=True) as mesh:
        mesh.address("router")       # "127.0.0.1:41234"
"""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path
from typing import AsyncIterator, Iterator, Sequence

import tritonclient.grpc.aio as triton_aio
import yaml

from bench.tenants import BenchTenant, tenants_yaml
from services.launcher import MODALITIES, ROOT, Mesh, free_base_port

CONFIG_DIR = ROOT / "config"
MAX_MESSAGE_BYTES = 64 << 20




def auditmesh_mesh(workdir: Path, tenants: Sequence[BenchTenant], profile: str | None = None) -> Mesh:
    """The full mesh with the shipped configs and `tenants` (file written under `workdir`); with
    `profile`, every shipped policy is copied with its `profile` set to it (`profile_policies_dir`)."""
    tenants_file = workdir / "tenants.yaml"
    tenants_file.write_text(tenants_yaml(tenants), encoding="utf-8")
    env = {"AUDITMESH_TENANTS_FILE": str(tenants_file)}
    if profile is not None:
        env["AUDITMESH_POLICIES_DIR"] = str(profile_policies_dir(workdir, profile))
    return Mesh(free_base_port(), extra_env=env)


def profile_policies_dir(workdir: Path, profile: str) -> Path:
    """Copies of config/policies/*.yaml under `workdir/policies-<profile>` with `profile: <profile>` and
    the version suffixed `+<profile>` (a stored version id always names one content)."""
    target = workdir / f"policies-{profile}"
    target.mkdir(parents=True, exist_ok=True)
    for path in sorted((CONFIG_DIR / "policies").glob("*.yaml")):
        policy = yaml.safe_load(path.read_text(encoding="utf-8"))
        policy.update(profile=profile, version=f"{policy['version']}+{profile}")
        (target / path.name).write_text(yaml.safe_dump(policy, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return target


def unbatched_config_dir(workdir: Path) -> Path:
    """Copies of the shipped configs under `workdir/unbatched-config`, modality batching set to 1."""
    target = workdir / "unbatched-config"
    target.mkdir(parents=True, exist_ok=True)
    shutil.copy(CONFIG_DIR / "router.yaml", target / "router.yaml")
    shutil.copy(CONFIG_DIR / "match.yaml", target / "match.yaml")  # the router reads its match upstream's limits
    for modality in MODALITIES:
        config = yaml.safe_load((CONFIG_DIR / f"{modality}.yaml").read_text(encoding="utf-8"))
        config.setdefault("batching", {}).update(max_batch_size=1, max_delay_ms=0, max_concurrency=1,
                                                    urgent_concurrency=0)
        (target / f"{modality}.yaml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return target


def unbatched_mesh(workdir: Path) -> Mesh:
    """The three modality services with batching off (start them with `with_router=False`)."""
    return Mesh(free_base_port(), config_dir=unbatched_config_dir(workdir))


@contextlib.contextmanager
def running_mesh(mesh: Mesh, *, with_router: bool, services: Sequence[str] = MODALITIES,
                 timeout_s: float = 180.0) -> Iterator[Mesh]:
    """Start `services` (default: the modality services) at once and wait until each serves, then the
    router lanes too when `with_router`; yield the mesh, stop everything on exit."""
    try:
        mesh.start_services(services, timeout_s)
        if with_router:
            mesh.start_routers(timeout_s)  # one process per lane of config/router.yaml
        yield mesh
    finally:
        mesh.stop()


@contextlib.asynccontextmanager
async def modality_clients(mesh: Mesh) -> AsyncIterator[dict[str, triton_aio.InferenceServerClient]]:
    """One tritonclient aio client per modality service, closed on exit."""
    options = [("grpc.max_send_message_length", MAX_MESSAGE_BYTES), ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES)]
    clients = {m: triton_aio.InferenceServerClient(mesh.address(m), channel_args=options) for m in MODALITIES}
    try:
        yield clients
    finally:
        for client in clients.values():
            await client.close()
