"""Integration fixtures: channels and stubs to the run's one real mesh (`mesh` and `tenants_file` are
session fixtures of tests/conftest.py, shared with the security suite).

The model repository must have been built (`make models`; `make test` does it). A missing piece fails
the tests with a clear message; nothing here is skipped.
"""

from __future__ import annotations

from typing import Iterator

import grpc
import pytest
from auditmesh.v1 import moderation_pb2_grpc as pb_grpc

from services.launcher import Mesh

from tests.mesh_fixtures import channel_to, message_options
from tests.servers import PostgresServer, fresh_database, postgres_server


@pytest.fixture(scope="session")
def router_channel(mesh: Mesh) -> Iterator[grpc.Channel]:
    with channel_to(mesh, "router", message_options(64 << 20)) as channel:
        yield channel


@pytest.fixture(scope="session")
def stub(router_channel: grpc.Channel) -> pb_grpc.ModerationServiceStub:
    return pb_grpc.ModerationServiceStub(router_channel)


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    """A throwaway PostgreSQL cluster for one test module (tests/servers.py)."""
    with postgres_server() as running:
        yield running


@pytest.fixture
def dsn(postgres: PostgresServer) -> str:
    """A fresh database of its own for each test."""
    return fresh_database(postgres)
