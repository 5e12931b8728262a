"""The real mesh for the integration and security suites: what both conftests build their session
fixtures from, and the start-yield-stop wrapper for the extra meshes some tests start.

A helper module, not a conftest, so that no test module imports another. The model repository
must have been built (`make models`; `make test` does it): a missing one fails, nothing is skipped.

Example::

    with shipped_mesh(tenants_file, with_metrics=False) as mesh, \\
            channel_to(mesh, "router", message_options(64 << 20)) as channel:
        ModerationServiceStub(channel).Moderate(...)
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Iterator, Sequence

import grpc
import pytest

from services.launcher import ROOT, Mesh, free_base_port, port_span

__all__ = ["channel_to", "message_options", "require_model_repository", "running", "shipped_mesh"]


def message_options(max_bytes: int) -> list[tuple[str, int]]:
    """Channel options that let a test's calls send and receive up to `max_bytes`."""
    return [("grpc.max_send_message_length", max_bytes), ("grpc.max_receive_message_length", max_bytes)]


def require_model_repository() -> None:
    """Fail (never skip) when `make models` has not built the model repository."""
    repository = ROOT / "model_repository"
    if not (repository / ".built").exists():
        pytest.fail(f"model repository {repository} is missing: run `make models` (make test does)")


@contextlib.contextmanager
def running(mesh: Mesh, *services: str) -> Iterator[Mesh]:
    """Start `services` in order, each waited for until it serves (none named: the whole mesh, as
    `Mesh.start` does), yield the mesh, and stop it (gracefully) on exit, whatever happened."""
    try:
        if services:
            for service in services:
                mesh.start_service(service)
                mesh.wait_serving(service)
        else:
            mesh.start()
        yield mesh
    finally:
        mesh.stop()


@contextlib.contextmanager
def shipped_mesh(tenants_file: Path, *, with_metrics: bool) -> Iterator[Mesh]:
    """Every service of the shipped configuration (text, vision, OCR and a router per lane of
    config/router.yaml) on free loopback ports, with the tenants of `tenants_file`; with
    `with_metrics`, each also serves /metrics on the `port_span()` ports after its own."""
    require_model_repository()
    count = port_span()
    base = free_base_port(2 * count if with_metrics else count)
    mesh = Mesh(base_port=base, metrics_base_port=base + count if with_metrics else 0,
                extra_env={"AUDITMESH_TENANTS_FILE": str(tenants_file)})
    with running(mesh):
        yield mesh


@contextlib.contextmanager
def channel_to(mesh: Mesh, service: str, options: Sequence[tuple[str, int]]) -> Iterator[grpc.Channel]:
    """An insecure channel to `service` of `mesh`, closed on exit."""
    with grpc.insecure_channel(mesh.address(service), options=list(options)) as channel:
        yield channel
