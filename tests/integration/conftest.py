"""Integration fixtures: the real mesh (four real service processes on loopback ports), test tenants.

The model repository must have been built (`make models`; `make test` does it). A missing piece fails
the tests with a clear message; nothing here is skipped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import grpc
import pytest
from auditmesh.v1 import moderation_pb2_grpc as pb_grpc

from services.launcher import Mesh
from services.router.tenants import hash_key

from tests.mesh_fixtures import channel_to, message_options, shipped_mesh
from tests.stubs import KEY_A, KEY_B, KEY_CHAT, KEY_FLOOD, KEY_LIMITED


@pytest.fixture(scope="session")
def tenants_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tenants") / "tenants.yaml"
    path.write_text(f"tenants:\n"
                    f"  - id: tenant-a\n    api_key_sha256: {hash_key(KEY_A)}\n    policies: [default, strict]\n"
                    f"  - id: tenant-b\n    api_key_sha256: {hash_key(KEY_B)}\n    policies: [strict]\n"
                    f"  - id: chat\n    api_key_sha256: {hash_key(KEY_CHAT)}\n    policies: [default]\n"
                    f"    qos_class: realtime\n"
                    f"  - id: flood\n    api_key_sha256: {hash_key(KEY_FLOOD)}\n    policies: [default]\n"
                    f"    qos_class: bulk\n    degrade: [ocr, vision]\n"
                    f"  - id: limited\n    api_key_sha256: {hash_key(KEY_LIMITED)}\n    policies: [default]\n"
                    f"    quota: {{items_per_s: 2, burst: 3}}\n")
    return path


@pytest.fixture(scope="session")
def mesh(tenants_file: Path) -> Iterator[Mesh]:
    """Every service (text, vision, OCR, and a router per lane of config/router.yaml), started once for
    the session and stopped (gracefully) at the end; each serves /metrics too."""
    with shipped_mesh(tenants_file, with_metrics=True) as running:
        yield running


@pytest.fixture(scope="session")
def router_channel(mesh: Mesh) -> Iterator[grpc.Channel]:
    with channel_to(mesh, "router", message_options(64 << 20)) as channel:
        yield channel


@pytest.fixture(scope="session")
def stub(router_channel: grpc.Channel) -> pb_grpc.ModerationServiceStub:
    return pb_grpc.ModerationServiceStub(router_channel)
