"""Issue 41: two router replicas per lane (`Mesh(router_replicas=2)`, the launcher's `--router-replicas`)
in front of one set of modality services, sharing quotas through a real Redis and the policy store.

Killing one replica (SIGKILL) in the middle of a load loses no request: the client library (round
robin over both addresses, retrying UNAVAILABLE) and a plain gRPC channel with the service config
documented in docs/deployment.md (`round_robin` over both addresses, gRPC's own retry policy) both get
a verdict for every item. The audit records of both replicas are queryable through the one admin API.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Iterator

import grpc
import pytest
from auditmesh.v1 import admin_pb2 as apb
from auditmesh.v1 import admin_pb2_grpc as apb_grpc
from auditmesh.v1 import moderation_pb2 as pb
from auditmesh.v1 import moderation_pb2_grpc as pb_grpc

from auditmesh.client import AsyncClient, ModerationError
from services.launcher import REPLICA_PORT_OFFSET, Mesh, free_base_port
from tests.mesh_fixtures import require_model_repository, running
from tests.servers import redis_server

pytestmark = pytest.mark.slow
ADMIN = [("x-admin-key", "demo-admin-key")]
KEY = "demo-acme-key"  # realtime: the interactive lane
#: What docs/deployment.md "Many router replicas" tells a platform writing its own client to use.
SERVICE_CONFIG = {
    "loadBalancingConfig": [{"round_robin": {}}],
    "methodConfig": [{"name": [{"service": "auditmesh.v1.ModerationService"}],
                      "retryPolicy": {"maxAttempts": 5, "initialBackoff": "0.05s", "maxBackoff": "0.5s",
                                      "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}}],
}


@pytest.fixture(scope="module")
def mesh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mesh]:
    require_model_repository()
    with redis_server(tmp_path_factory.mktemp("redis")) as redis:
        replicated = Mesh(base_port=free_base_port(REPLICA_PORT_OFFSET + 2), router_replicas=2,
                          extra_env={"AUDITMESH_REDIS_URL": redis.url})
        with running(replicated):
            yield replicated


def texts(count: int) -> list[str]:
    return [f"message {i}: see you at the match tonight, bring snacks" for i in range(count)]


async def test_killing_a_replica_under_load_loses_no_request(mesh: Mesh) -> None:
    first, second = mesh.replicas("router")
    addresses = [mesh.address(first), mesh.address(second)]
    items = texts(240)
    verdicts: list[str] = []
    errors: list[str] = []
    options = [("grpc.service_config", json.dumps(SERVICE_CONFIG)), ("grpc.enable_retries", 1)]

    async with AsyncClient(addresses, api_key=KEY, batching=False, timeout_s=10.0) as client, \
            grpc.aio.insecure_channel("ipv4:" + ",".join(addresses), options=options) as channel:
        stub = pb_grpc.ModerationServiceStub(channel)

        async def through_library(text: str) -> None:
            try:
                verdicts.append((await client.moderate(text=text)).decision)
            except ModerationError as error:
                errors.append(f"library: {error.code.name} {error.message}")

        async def through_service_config(text: str) -> None:
            request = pb.ModerateRequest(item=pb.Item(parts=[pb.Part(text=text)]))
            try:
                response = await stub.Moderate(request, metadata=[("x-api-key", KEY)], timeout=10.0)
                verdicts.append(pb.Decision.Name(response.decision))
            except grpc.aio.AioRpcError as error:
                errors.append(f"service config: {error.code().name} {error.details()}")

        async def load() -> None:
            for i in range(0, len(items), 8):  # 8 in flight at a time, through both clients
                await asyncio.gather(*(through_library(t) for t in items[i:i + 4]),
                                     *(through_service_config(t) for t in items[i + 4:i + 8]))

        async def kill_second_replica() -> None:
            while len(verdicts) < 60:
                await asyncio.sleep(0.01)
            mesh.processes[second].kill()

        started = time.monotonic()
        await asyncio.gather(load(), kill_second_replica())
    assert mesh.processes[second].poll() is not None, "the replica was not killed during the load"
    assert not errors, errors[:5]
    assert len(verdicts) == len(items), f"{len(verdicts)} verdicts for {len(items)} items in {time.monotonic() - started:.1f} s"


def test_both_replicas_audit_into_one_place(mesh: Mesh) -> None:
    first, second = mesh.replicas("router")
    if mesh.processes.get(second) is None or mesh.processes[second].poll() is not None:
        mesh.start_service(second)
        mesh.wait_serving(second)
    marker = f"audit-{time.time_ns()}"
    for replica in (first, second):
        with grpc.insecure_channel(mesh.address(replica)) as channel:
            pb_grpc.ModerationServiceStub(channel).Moderate(
                pb.ModerateRequest(item=pb.Item(id=f"{marker}-{replica}", parts=[pb.Part(text="hello there")])),
                metadata=[("x-api-key", KEY)], timeout=10)
    time.sleep(0.5)  # audit records are written every 0.2 s
    with grpc.insecure_channel(mesh.admin_address) as channel:
        page = apb_grpc.PolicyAdminStub(channel).QueryAudit(apb.QueryAuditRequest(tenant="acme", limit=1000),
                                                            metadata=ADMIN, timeout=10)
    ids = {record.item_id for record in page.records}
    assert {f"{marker}-{first}", f"{marker}-{second}"} <= ids
