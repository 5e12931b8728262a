"""The verdict cache through the real router (its own process with `verdict_cache.enabled`, in front of
the session mesh's text, vision and OCR services): a repeated item is answered from the cache with its
own request id and offsets, another tenant's identical item is not, a policy activation invalidates,
the audit record says so, and the Prometheus counters count it."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Iterator

import grpc
import pytest
import yaml
from auditmesh.v1 import admin_pb2 as apb
from auditmesh.v1 import admin_pb2_grpc as apb_grpc
from auditmesh.v1 import moderation_pb2 as pb
from auditmesh.v1 import moderation_pb2_grpc as pb_grpc

from bench.side_router import CONFIG_DIR, side_router
from services.launcher import MODALITIES, Mesh
from tests.stubs import KEY_A, KEY_B, item, sample, scrape

ADMIN = [("x-admin-key", "demo-admin-key")]
TEXT = "buy cheap followers now, you idiot"


@pytest.fixture(scope="module")
def cached_router(mesh: Mesh, tenants_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mesh]:
    workdir = tmp_path_factory.mktemp("verdict-cache")
    with side_router(workdir, {m: mesh.address(m) for m in MODALITIES}, tenants_file,
                     {"verdict_cache": {"enabled": True, "ttl_s": 600}}) as router:
        yield router


def call(channel: grpc.Channel, text: str, key: str, request_id: str, policy: str = "strict") -> pb.ModerateResponse:
    stub = pb_grpc.ModerationServiceStub(channel)
    response: pb.ModerateResponse = stub.Moderate(
        pb.ModerateRequest(request_id=request_id, item=item(text, item_id=request_id), policy=policy),
        metadata=[("x-api-key", key)], timeout=30)
    return response


def comparable(response: pb.ModerateResponse) -> tuple[object, ...]:
    """What must be equal between a fresh and a cached answer (ids and timings aside)."""
    return (response.decision, [(c.category, round(c.score, 5), c.action, c.rule) for c in response.categories],
            [e.SerializeToString(deterministic=True) for e in response.evidence],
            response.policy_version, [(m.name, m.version) for m in response.models])


def test_repeats_are_cached_per_tenant_and_a_policy_activation_invalidates(cached_router: Mesh) -> None:
    with grpc.insecure_channel(cached_router.address("router")) as channel, \
            grpc.insecure_channel(cached_router.admin_address) as admin_channel:  # PolicyAdmin: its own port
        # The router learns every model version (from the services' ModelConfig, retried each second, and from
        # answers) before it caches: on a loaded machine that can take a few seconds after start.
        deadline = time.monotonic() + 20
        while not call(channel, "warm up the text model versions", KEY_A, "warm").cached:
            assert time.monotonic() < deadline, "the router did not learn every model version within 20 s"
            time.sleep(0.2)
        first = call(channel, TEXT, KEY_A, "first")
        second = call(channel, TEXT, KEY_A, "second")
        assert not first.cached and second.cached
        assert second.request_id == "second" and second.item_id == "second"
        assert comparable(second) == comparable(first)
        assert [t.stage for t in second.timings] == ["admission", "cache", "total"]
        respelled = call(channel, TEXT.upper().replace(" ", "  "), KEY_A, "respelled")
        assert respelled.cached and respelled.decision == first.decision
        for evidence in respelled.evidence:
            if evidence.HasField("text_span") and evidence.text_span.text:
                span = evidence.text_span
                assert TEXT.upper().replace(" ", "  ")[span.start:span.end] == span.text

        other = call(channel, TEXT, KEY_B, "other-tenant")  # tenant-b: same text, same policy version
        assert not other.cached and other.policy_version == first.policy_version

        admin = apb_grpc.PolicyAdminStub(admin_channel)
        document = yaml.safe_load((CONFIG_DIR / "policies" / "strict.yaml").read_text(encoding="utf-8"))
        document["version"] = "cache-test-2"
        admin.PutVersion(apb.PutVersionRequest(kind=apb.POLICY, name="strict", content=yaml.safe_dump(document),
                                               activate=True), metadata=ADMIN, timeout=10)
        after = call(channel, TEXT, KEY_A, "after-activation")
        assert after.policy_version == "cache-test-2" and not after.cached
        assert call(channel, TEXT, KEY_A, "after-again").cached

        deadline = time.monotonic() + 10
        records: dict[str, apb.AuditRecord] = {}
        while time.monotonic() < deadline and not {"first", "second"} <= records.keys():
            page = admin.QueryAudit(apb.QueryAuditRequest(tenant="tenant-a", limit=1000), metadata=ADMIN, timeout=10)
            records = {r.request_id: r for r in page.records}
            time.sleep(0.2)
        assert not records["first"].cached and records["second"].cached
        assert records["second"].audit_id != records["first"].audit_id
        # each answer names its own decision's record, the cached one too
        assert (first.audit_id, second.audit_id) == (records["first"].audit_id, records["second"].audit_id)

    samples = scrape(cached_router.metrics_port("router"))
    # second, respelled, after-again, and the one warm-up answered from the cache (the loop stops at the first)
    assert sample(samples, "auditmesh_router_verdict_cache_hits_total", tenant="tenant-a") == 4
    assert sample(samples, "auditmesh_router_verdict_cache_hits_total", tenant="tenant-b") == 0
    assert sample(samples, "auditmesh_router_verdict_cache_misses_total", tenant="tenant-b") == 1
    assert sample(samples, "auditmesh_router_verdict_cache_bytes", tenant="tenant-a") > 0
