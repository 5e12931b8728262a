"""Security fixtures: channels to the run's one real mesh (`mesh` and `tenants_file`, with this suite's
tenant `sec`, are session fixtures of tests/conftest.py, shared with the integration suite), and channels that speak to the router and to a modality service directly, as an
outside client on the same network could.

The model repository must have been built (`make models`; `make test` does it). Nothing is skipped.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

import grpc
import pytest
from auditmesh.v1 import moderation_pb2_grpc as pb_grpc
from tritonclient.grpc import service_pb2_grpc

from services.launcher import Mesh

from tests.mesh_fixtures import channel_to
from tests.security.inputs import CHANNEL_OPTIONS


@pytest.fixture(scope="session")
def router_channel(mesh: Mesh) -> Iterator[grpc.Channel]:
    with channel_to(mesh, "router", CHANNEL_OPTIONS) as channel:
        yield channel


@pytest.fixture(scope="session")
def stub(router_channel: grpc.Channel) -> pb_grpc.ModerationServiceStub:
    return pb_grpc.ModerationServiceStub(router_channel)


class WithMetadata(grpc.UnaryUnaryClientInterceptor):
    """Adds fixed call metadata (the mesh's internal secret) to every unary call."""

    def __init__(self, metadata: list[tuple[str, str]]) -> None:
        self._metadata = metadata

    def intercept_unary_unary(self, continuation: Callable[..., Any], details: Any, request: Any) -> Any:
        metadata = [*(details.metadata or ()), *self._metadata]
        return continuation(details._replace(metadata=metadata), request)


@pytest.fixture(scope="session")
def text_channel(mesh: Mesh) -> Iterator[grpc.Channel]:
    """The text service's port with the mesh's internal secret on every call, as the router calls it:
    what is tested is what an insider (or a leaked secret) could send."""
    with channel_to(mesh, "text", CHANNEL_OPTIONS) as channel:
        yield grpc.intercept_channel(channel, WithMetadata(mesh.internal_metadata()))


@pytest.fixture(scope="session")
def text_kserve(text_channel: grpc.Channel) -> service_pb2_grpc.GRPCInferenceServiceStub:
    return service_pb2_grpc.GRPCInferenceServiceStub(text_channel)
