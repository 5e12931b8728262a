"""Issue 12 item 6: a tenant-scoped admin key stored the next version id of a shared policy (with a
weakened threshold), so the global admin's later put of that id was refused and a global activation
by id would have switched it on for everyone; it could also read another tenant's active scope.
Scoped keys now store only `<tenant>:<id>` versions of their tenants and read only their own scopes."""

from __future__ import annotations

from pathlib import Path
from typing import AsyncIterator

import grpc
import pytest
from auditmesh.v1 import admin_pb2 as apb
from auditmesh.v1 import admin_pb2_grpc as apb_grpc

from services.router.control.admin_auth import AdminKey
from services.router.tenants import hash_key
from tests.stubs import admin_api, admin_key, policy_yaml, status_of

ROOT_KEY, A_KEY, B_KEY = "root-admin-key", "a-only-admin-key", "b-only-admin-key"


@pytest.fixture
async def stub(tmp_path: Path) -> AsyncIterator[apb_grpc.PolicyAdminStub]:
    keys = [AdminKey("root", hash_key(ROOT_KEY)), AdminKey("a-team", hash_key(A_KEY), ("a",)),
            AdminKey("b-team", hash_key(B_KEY), ("b",))]
    async with admin_api(tmp_path, keys) as api:  # tenants a (default, strict) and b (strict); default@1, strict@1
        yield api.stub


def put(version: str, hate_block: float = 0.9, name: str = "strict") -> apb.PutVersionRequest:
    return apb.PutVersionRequest(kind=apb.POLICY, name=name, content=policy_yaml(name, version, hate_block=hate_block))


async def test_a_scoped_key_cannot_store_a_shared_version_id(stub: apb_grpc.PolicyAdminStub) -> None:
    code, message = await status_of(stub.PutVersion(put("2", hate_block=0.99), metadata=admin_key(A_KEY)))
    assert code == grpc.StatusCode.PERMISSION_DENIED and "'a:2'" in message
    # So the global admin's own "2" is still free, and nobody can activate a weakened shared "2".
    stored = await stub.PutVersion(put("2"), metadata=admin_key(ROOT_KEY))
    assert stored.version == "2"


async def test_a_scoped_key_stores_and_activates_only_its_own_tenants_versions(stub: apb_grpc.PolicyAdminStub) -> None:
    own = await stub.PutVersion(put("a:2", hate_block=0.8), metadata=admin_key(A_KEY))
    assert own.version == "a:2"
    assert (await status_of(stub.PutVersion(put("b:2"), metadata=admin_key(A_KEY))))[0] == grpc.StatusCode.PERMISSION_DENIED
    activated = await stub.Activate(apb.ActivateRequest(kind=apb.POLICY, name="strict", version="a:2", tenant="a"),
                                    metadata=admin_key(A_KEY))
    assert (activated.tenant, activated.version) == ("a", "a:2")
    # A tenant's version is never activated globally or for another tenant, by any key.
    for tenant, who in (("", ROOT_KEY), ("b", ROOT_KEY), ("b", B_KEY)):
        code, message = await status_of(stub.Activate(apb.ActivateRequest(kind=apb.POLICY, name="strict", version="a:2",
                                                                         tenant=tenant), metadata=admin_key(who)))
        assert code == grpc.StatusCode.PERMISSION_DENIED and "belongs to tenant 'a'" in message
    canary = apb.StartCanaryRequest(policy="strict", tenant="b", candidate_version="a:2", percent=10)
    assert (await status_of(stub.StartCanary(canary, metadata=admin_key(ROOT_KEY))))[0] == grpc.StatusCode.PERMISSION_DENIED
    put_and_activate = apb.PutVersionRequest(kind=apb.POLICY, name="strict", content=policy_yaml("strict", "a:3"),
                                             activate=True)
    assert (await status_of(stub.PutVersion(put_and_activate, metadata=admin_key(ROOT_KEY))))[0] == grpc.StatusCode.PERMISSION_DENIED


async def test_a_scoped_key_reads_only_its_own_scopes(stub: apb_grpc.PolicyAdminStub) -> None:
    await stub.PutVersion(put("b:7", hate_block=0.6), metadata=admin_key(B_KEY))
    await stub.Activate(apb.ActivateRequest(kind=apb.POLICY, name="strict", version="b:7", tenant="b"), metadata=admin_key(B_KEY))
    # b's active scope, its version and diffs against it are closed to a's key.
    assert (await status_of(stub.GetVersion(apb.GetVersionRequest(kind=apb.POLICY, name="strict", tenant="b"),
                                          metadata=admin_key(A_KEY))))[0] == grpc.StatusCode.PERMISSION_DENIED
    assert (await status_of(stub.GetVersion(apb.GetVersionRequest(kind=apb.POLICY, name="strict", version="b:7"),
                                          metadata=admin_key(A_KEY))))[0] == grpc.StatusCode.PERMISSION_DENIED
    diff = apb.DiffVersionsRequest(kind=apb.POLICY, name="strict", from_version="1", to_version="b:7")
    assert (await status_of(stub.DiffVersions(diff, metadata=admin_key(A_KEY))))[0] == grpc.StatusCode.PERMISSION_DENIED
    listed = await stub.ListVersions(apb.ListVersionsRequest(kind=apb.POLICY, name="strict"), metadata=admin_key(A_KEY))
    assert [(v.version, list(v.active_in)) for v in listed.versions] == [("1", [""])]  # not b:7, not b's scope
    # Its own scope and the shared versions it may read; b's key reads its own.
    shared = await stub.GetVersion(apb.GetVersionRequest(kind=apb.POLICY, name="strict", tenant="a"), metadata=admin_key(A_KEY))
    assert shared.info.version == "1"
    mine = await stub.GetVersion(apb.GetVersionRequest(kind=apb.POLICY, name="strict", tenant="b"), metadata=admin_key(B_KEY))
    assert mine.info.version == "b:7" and list(mine.info.active_in) == ["b"]
    everything = await stub.ListVersions(apb.ListVersionsRequest(kind=apb.POLICY, name="strict"), metadata=admin_key(ROOT_KEY))
    assert [(v.version, list(v.active_in)) for v in everything.versions] == [("1", [""]), ("b:7", ["b"])]
