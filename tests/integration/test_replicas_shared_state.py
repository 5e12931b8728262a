"""Issue 41: router processes on shared state, the way a cluster runs them: two replicas with one
PostgreSQL (policy store and audit log) and one Redis (quotas), both started here, each replica with
its own (empty) local files, as on two hosts.

- An activation through one replica's admin API is served by the other: every one of 15 activations
  within 1 s (the target), P99 measured from the admin call's return to the other's first answer
  naming the version.
- Decisions made by either replica are found through the one admin API, in the audit log and as review
  tasks on one stream; with Redis alone (no PostgreSQL) the review tasks are one queue in Redis Streams.

No modality service runs: the replicas answer degraded (fail-closed) verdicts that still name the
policy version, which is all these checks read.
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import grpc
import pytest
from auditmesh.v1 import admin_pb2 as apb
from auditmesh.v1 import admin_pb2_grpc as apb_grpc
from auditmesh.v1 import moderation_pb2 as pb
from auditmesh.v1 import moderation_pb2_grpc as pb_grpc

from services.launcher import ROOT, free_base_port
from tests.servers import postgres_server, redis_server

pytestmark = pytest.mark.slow
KEY = [("x-api-key", "demo-acme-key")]
ADMIN = [("x-admin-key", "demo-admin-key")]


def start_replica(folder: Path, port: int, admin_port: int, dead_port: int, dsn: str, redis_url: str,
                  **settings: str) -> subprocess.Popen[bytes]:
    folder.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AUDITMESH_")}
    env.update(settings)
    env.update({"AUDITMESH_LISTEN": f"127.0.0.1:{port}", "AUDITMESH_METRICS_LISTEN": "off",
                "AUDITMESH_ADMIN_LISTEN": f"127.0.0.1:{admin_port}" if admin_port else "off",
                "AUDITMESH_POSTGRES_DSN": dsn, "AUDITMESH_REDIS_URL": redis_url,
                # Its own local files (labels, review tasks): as on a host of its own.
                "AUDITMESH_POLICY_STORE": str(folder / "unused.sqlite"), "AUDITMESH_AUDIT_LOG": str(folder / "unused-audit.sqlite"),
                **{f"AUDITMESH_{m}_URL": f"127.0.0.1:{dead_port}" for m in ("TEXT", "VISION", "OCR")}})
    return subprocess.Popen([sys.executable, "-m", "services.router", "--config", "config/router.yaml"], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=(folder / "router.log").open("wb"))


def wait_ready(address: str) -> None:
    with grpc.insecure_channel(address) as channel:
        grpc.channel_ready_future(channel).result(timeout=60)


@pytest.fixture(scope="module")
def replicas(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, str]]:
    """(replica A, replica B, A's admin address)."""
    folder = tmp_path_factory.mktemp("replicas")
    base = free_base_port(4)
    with postgres_server() as postgres, redis_server(folder) as redis:
        a = start_replica(folder / "a", base, base + 2, base + 3, postgres.dsn, redis.url)
        b = start_replica(folder / "b", base + 1, 0, base + 3, postgres.dsn, redis.url)
        try:
            for port in (base, base + 1, base + 2):
                wait_ready(f"127.0.0.1:{port}")
            yield f"127.0.0.1:{base}", f"127.0.0.1:{base + 1}", f"127.0.0.1:{base + 2}"
        finally:
            for process in (a, b):
                process.terminate()
            for process in (a, b):
                process.wait(30)


def moderate(stub: pb_grpc.ModerationServiceStub, item_id: str = "") -> pb.ModerateResponse:
    response: pb.ModerateResponse = stub.Moderate(pb.ModerateRequest(item=pb.Item(id=item_id, parts=[pb.Part(text="hello")])),
                                                  metadata=KEY, timeout=5)
    return response


def test_an_activation_on_one_replica_is_served_by_the_other_within_a_second(replicas: tuple[str, str, str]) -> None:
    address_a, address_b, admin_address = replicas
    text = (ROOT / "config" / "policies" / "default.yaml").read_text()
    delays = []
    with grpc.insecure_channel(admin_address) as admin_channel, grpc.insecure_channel(address_b) as b_channel:
        admin = apb_grpc.PolicyAdminStub(admin_channel)
        b = pb_grpc.ModerationServiceStub(b_channel)
        for i in range(15):
            version = f"replicas-{i}"
            admin.PutVersion(apb.PutVersionRequest(kind=apb.POLICY, name="default", author="test",
                                                   content=re.sub(r'(?m)^version: .*$', f'version: "{version}"', text)),
                             metadata=ADMIN, timeout=10)
            admin.Activate(apb.ActivateRequest(kind=apb.POLICY, name="default", version=version), metadata=ADMIN, timeout=10)
            activated = time.monotonic()
            while moderate(b).policy_version != version:
                assert time.monotonic() - activated < 1.0, f"replica B did not serve {version} within 1 s"
                time.sleep(0.002)
            delays.append(time.monotonic() - activated)
    p99 = statistics.quantiles(delays, n=100, method="inclusive")[98]
    print(f"activation served by the other replica after P50 {statistics.median(delays) * 1000:.1f} ms, "
          f"P99 {p99 * 1000:.1f} ms, max {max(delays) * 1000:.1f} ms")
    assert p99 < 1.0


def test_both_replicas_decisions_are_in_the_one_audit_log(replicas: tuple[str, str, str]) -> None:
    address_a, address_b, admin_address = replicas
    marker = f"shared-{time.time_ns()}"
    for name, address in (("a", address_a), ("b", address_b)):
        with grpc.insecure_channel(address) as channel:
            moderate(pb_grpc.ModerationServiceStub(channel), f"{marker}-{name}")
    deadline = time.monotonic() + 5
    found: set[str] = set()
    with grpc.insecure_channel(admin_address) as channel:
        admin = apb_grpc.PolicyAdminStub(channel)
        while time.monotonic() < deadline and found != {f"{marker}-a", f"{marker}-b"}:
            time.sleep(0.3)  # each replica writes its buffer every 0.2 s
            page = admin.QueryAudit(apb.QueryAuditRequest(tenant="acme", limit=1000), metadata=ADMIN, timeout=10)
            found = {r.item_id for r in page.records if r.item_id.startswith(marker)}
    assert found == {f"{marker}-a", f"{marker}-b"}


def test_one_review_stream_gets_both_replicas_tasks(replicas: tuple[str, str, str]) -> None:
    """Without modality services every verdict is REVIEW (fail-closed), so each call becomes a review
    task, written by the replica that answered it; the stream on A's admin API gets both."""
    assert_one_stream_gets_both(*replicas)


def test_with_redis_alone_the_review_tasks_are_shared_through_redis_streams(tmp_path: Path) -> None:
    """Replicas on one Redis and no PostgreSQL (each its own policy store and audit log, as on two hosts), with
    `lifecycle.review_tasks_backend: redis`: their review tasks are one queue in Redis Streams, so one stream
    gets both replicas' tasks."""
    base = free_base_port(4)
    redis_tasks = {"AUDITMESH_REVIEW_TASKS_BACKEND": "redis"}
    with redis_server(tmp_path) as redis:
        a = start_replica(tmp_path / "a", base, base + 2, base + 3, "", redis.url, **redis_tasks)
        b = start_replica(tmp_path / "b", base + 1, 0, base + 3, "", redis.url, **redis_tasks)
        try:
            for port in (base, base + 1, base + 2):
                wait_ready(f"127.0.0.1:{port}")
            assert_one_stream_gets_both(f"127.0.0.1:{base}", f"127.0.0.1:{base + 1}", f"127.0.0.1:{base + 2}")
        finally:
            for process in (a, b):
                process.terminate()
            for process in (a, b):
                process.wait(30)


def assert_one_stream_gets_both(address_a: str, address_b: str, admin_address: str) -> None:
    marker = f"task-{time.time_ns()}"
    for name, address in (("a", address_a), ("b", address_b)):
        with grpc.insecure_channel(address) as channel:
            assert moderate(pb_grpc.ModerationServiceStub(channel), f"{marker}-{name}").decision == pb.REVIEW
    found: set[str] = set()
    with grpc.insecure_channel(admin_address) as channel:
        stream = apb_grpc.PolicyAdminStub(channel).StreamReviewTasks(
            apb.StreamReviewTasksRequest(tenant="acme", max_unacked=1000), metadata=ADMIN, timeout=10)
        try:
            for task in stream:
                if task.record.item_id.startswith(marker):
                    found.add(task.record.item_id)
                if found == {f"{marker}-a", f"{marker}-b"}:
                    break
        finally:
            stream.cancel()
    assert found == {f"{marker}-a", f"{marker}-b"}
