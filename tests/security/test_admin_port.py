"""Issue 12 item 8: server reflection on the public port listed auditmesh.v1.PolicyAdmin to anonymous
callers (and the port served it). The admin API now has its own port (`admin_listen`): the public
port neither lists nor serves it. Also item 7 on the public port: wrong API keys are throttled with
RESOURCE_EXHAUSTED + RetryInfo and counted, valid keys keep working."""

from __future__ import annotations

from pathlib import Path
from typing import AsyncIterator

import grpc
import pytest
from auditmesh.v1 import admin_pb2 as apb
from auditmesh.v1 import admin_pb2_grpc as apb_grpc
from auditmesh.v1 import moderation_pb2 as pb
from auditmesh.v1 import moderation_pb2_grpc as pb_grpc
from google.rpc import error_details_pb2
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from grpc_status import rpc_status

from services.common.auth_throttle import ThrottleConfig
from services.common.service_config import ServerConfig
from services.launcher import ROOT, free_base_port
from services.router.config import LifecycleConfig, RouterConfig, Upstream
from services.router.control.admin_auth import AdminKey
from services.router.main import Router
from services.router.policy_lifecycle import PolicyLifecycle
from services.router.tenants import hash_key

TENANT_KEY, ADMIN_KEY = "security-tenant-key", "security-admin-key"


@pytest.fixture(scope="module")
async def router(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Router]:
    folder = tmp_path_factory.mktemp("admin-port")
    tenants = folder / "tenants.yaml"
    tenants.write_text(f"tenants:\n  - {{id: sec, api_key_sha256: {hash_key(TENANT_KEY)}, policies: [default]}}\n")
    dead = f"127.0.0.1:{free_base_port(1)}"
    config = RouterConfig(upstreams={m: Upstream(dead, m) for m in ("text", "vision", "ocr")},
                          server=ServerConfig("127.0.0.1:0", grace_period_s=0.2), admin_listen="127.0.0.1:0",
                          tenants_file=str(tenants), policies_dir=str(ROOT / "config" / "policies"),
                          auth_throttle=ThrottleConfig(peer_failures=5, window_s=60.0),
                          lifecycle=LifecycleConfig(store_path=str(folder / "store.sqlite"),
                                                    audit_path=str(folder / "audit.sqlite"),
                                                    admin_keys=(AdminKey("ops", hash_key(ADMIN_KEY)),)))
    running = Router(config, PolicyLifecycle.open(config))
    await running.start()
    yield running
    await running.service.stop()


def address(port: int) -> str:
    return f"127.0.0.1:{port}"


async def listed_services(port: int) -> list[str]:
    async with grpc.aio.insecure_channel(address(port)) as channel:
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        async for response in stub.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")])):
            return sorted(s.name for s in response.list_services_response.service)
    raise AssertionError("no reflection answer")


async def test_the_public_port_neither_lists_nor_serves_policy_admin(router: Router) -> None:
    public = await listed_services(router.service.port)
    assert "auditmesh.v1.ModerationService" in public and "auditmesh.v1.PolicyAdmin" not in public
    async with grpc.aio.insecure_channel(address(router.service.port)) as channel:
        try:
            await apb_grpc.PolicyAdminStub(channel).ListVersions(apb.ListVersionsRequest(name="default"),
                                                                 metadata=[("x-admin-key", ADMIN_KEY)])
            raise AssertionError("PolicyAdmin answered on the public port")
        except grpc.aio.AioRpcError as error:
            assert error.code() == grpc.StatusCode.UNIMPLEMENTED


async def test_the_admin_port_serves_policy_admin_and_not_moderation(router: Router) -> None:
    assert router.admin_service is not None
    port = router.admin_service.port
    assert port != router.service.port
    assert "auditmesh.v1.PolicyAdmin" in await listed_services(port)
    assert "auditmesh.v1.ModerationService" not in await listed_services(port)
    async with grpc.aio.insecure_channel(address(port)) as channel:
        listed = await apb_grpc.PolicyAdminStub(channel).ListVersions(apb.ListVersionsRequest(name="default"),
                                                                      metadata=[("x-admin-key", ADMIN_KEY)])
        assert listed.versions


async def test_wrong_api_keys_are_throttled_without_refusing_valid_ones_first(router: Router) -> None:
    request = pb.ModerateRequest(item=pb.Item(id="x"))
    request.item.parts.add(text="hello")
    async with grpc.aio.insecure_channel(address(router.service.port)) as channel:
        stub = pb_grpc.ModerationServiceStub(channel)
        valid = await stub.Moderate(request, metadata=[("x-api-key", TENANT_KEY)], timeout=10)
        assert valid.decision  # answered (degraded: the upstreams are down), not refused
        codes = []
        for i in range(7):
            try:
                await stub.Moderate(request, metadata=[("x-api-key", f"guess-{i}")], timeout=10)
            except grpc.aio.AioRpcError as error:
                codes.append(error.code())
                last = error
        assert codes == [grpc.StatusCode.UNAUTHENTICATED] * 4 + [grpc.StatusCode.RESOURCE_EXHAUSTED] * 3
        status = rpc_status.from_call(last)
        assert status is not None
        info = error_details_pb2.RetryInfo()
        assert status.details[0].Unpack(info) and info.retry_delay.seconds > 0
    value = router.registry.get_sample_value
    assert value("auditmesh_auth_failures_total", {"surface": "public"}) == 5
    assert value("auditmesh_auth_throttled_total", {"surface": "public"}) == 3
