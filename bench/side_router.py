"""A router process of its own configuration in front of modality services that already run: a router
with the verdict cache on, or one whose text upstream is a Triton Inference Server. Used by the
integration tests and the benchmarks; the router itself is the unchanged `python -m services.router`.

The router gets copies of the shipped configs under `workdir` (one process, no lanes), `router_overrides`
merged into its router.yaml, its own policy store and audit log, and the upstream addresses given.

Example::

    with side_router(tmp, {"text": "127.0.0.1:8101", "vision": ..., "ocr": ...}, tenants_file,
                     {"verdict_cache": {"enabled": True}}) as router:
        router.address("router")    # "127.0.0.1:41234"; router.metrics_port("router") for /metrics
"""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path
from typing import Any, Iterator, Mapping

import yaml

from services.launcher import MODALITIES, ROOT, Mesh, free_base_port

CONFIG_DIR = ROOT / "config"


def side_config_dir(workdir: Path, router_overrides: Mapping[str, Any]) -> Path:
    """Copies of config/ under `workdir/side-config`: router.yaml without lanes, `router_overrides` merged
    (one level deep: a mapping value updates the section)."""
    target = workdir / "side-config"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(CONFIG_DIR, target)
    router = yaml.safe_load((target / "router.yaml").read_text(encoding="utf-8"))
    router.pop("lanes", None)
    for key, value in router_overrides.items():
        if isinstance(value, Mapping) and isinstance(router.get(key), dict):
            router[key].update(value)
        else:
            router[key] = value
    (target / "router.yaml").write_text(yaml.safe_dump(router, sort_keys=False), encoding="utf-8")
    return target


@contextlib.contextmanager
def side_router(workdir: Path, upstreams: Mapping[str, str], tenants_file: Path,
                router_overrides: Mapping[str, Any], *, with_metrics: bool = True,
                output: int | None = None) -> Iterator[Mesh]:
    """A started router (see the module docstring) in front of `upstreams` (modality -> host:port);
    stopped on exit."""
    config_dir = side_config_dir(workdir, router_overrides)
    base = free_base_port(2 * (len(MODALITIES) + 1))
    env = {"AUDITMESH_TENANTS_FILE": str(tenants_file),
           **{f"AUDITMESH_{m.upper()}_URL": address for m, address in upstreams.items()}}
    mesh = Mesh(base, config_dir=config_dir, extra_env=env, output=output,
                metrics_base_port=base + len(MODALITIES) + 1 if with_metrics else 0)
    try:
        mesh.start_routers()
        yield mesh
    finally:
        mesh.stop()
