"""Policy and model lifecycle on the real mesh: 100 policy swaps under load with zero failed requests
and every response's version active during its lifetime (and named by its audit record), a shadow
canary's disagreements, an automatic canary rollback, hot model reload under load, and a broken model
file rejected while the old version keeps serving."""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest
import tritonclient.grpc.aio as triton_aio
import yaml
from auditmesh.v1 import admin_pb2 as apb
from auditmesh.v1 import admin_pb2_grpc as apb_grpc
from auditmesh.v1 import moderation_pb2 as pb
from auditmesh.v1 import moderation_pb2_grpc as pb_grpc
from tritonclient.grpc import InferInput, service_pb2
from tritonclient.utils import InferenceServerException

from services.common.serving.model_lifecycle import next_version
from services.common.serving.model_repository import sha256_of
from services.launcher import ROOT, Mesh, free_base_port
from services.router.tenants import hash_key
from services.text.model import TextModerationModel
from services.text.semantic import TextSemanticModel
from services.text.server import repository_models as text_repository_models
from tests.stubs import MeshTritonClient, scrape

ADMIN = [("x-admin-key", "demo-admin-key")]  # config/router.yaml's loopback demo admin key
KEY = "test-key-lifecycle"
POLICY = "swaptest"
SWAPS = 100
TEXT = "caught a bluefin near the pier today"


def swap_policy(version: str, terms: list[str]) -> str:
    """No score thresholds: the decision depends only on the version's own blocklist."""
    return yaml.safe_dump({"name": POLICY, "version": version, "categories": {},
                           "blocklist": {"use_default_lexicon": False,
                                         "custom": {"watch": {"severity": "high", "terms": terms}}}})


def version_name(i: int) -> str:
    return f"s{i:03d}"


def blocks_bluefin(version: str) -> bool:
    return int(version[1:]) % 2 == 0


@dataclass
class Answer:
    started: float
    finished: float
    request_id: str
    version: str
    decision: int


async def setup_swap_policy(admin: apb_grpc.PolicyAdminStub) -> None:
    """Versions s000..s100 (even ones block "bluefin"), s000 active, and a tenant that uses them."""
    for i in range(SWAPS + 1):
        terms = ["bluefin"] if i % 2 == 0 else ["redfin"]
        await admin.PutVersion(apb.PutVersionRequest(kind=apb.POLICY, name=POLICY, content=swap_policy(version_name(i), terms),
                                                     activate=i == 0, comment="swap test"), metadata=ADMIN)
    tenants = await admin.GetVersion(apb.GetVersionRequest(kind=apb.TENANTS), metadata=ADMIN)
    data = yaml.safe_load(tenants.content)
    if not any(t["id"] == "lifecycle" for t in data["tenants"]):
        data["tenants"].append({"id": "lifecycle", "api_key_sha256": hash_key(KEY), "policies": [POLICY]})
        data["version"] = "with-lifecycle-tenant"
        await admin.PutVersion(apb.PutVersionRequest(kind=apb.TENANTS, content=yaml.safe_dump(data), activate=True),
                               metadata=ADMIN)


async def load(stub: pb_grpc.ModerationServiceStub, stop: asyncio.Event, answers: list[Answer], failures: list[str],
               worker: int, text: str = TEXT, key: str = KEY) -> None:
    i = 0
    while not stop.is_set():
        request_id = f"w{worker}-{i}"
        i += 1
        started = time.monotonic()
        try:
            response = await stub.Moderate(pb.ModerateRequest(request_id=request_id, item=pb.Item(
                id=request_id, parts=[pb.Part(text=text)])), metadata=[("x-api-key", key)], timeout=10.0)
        except grpc.aio.AioRpcError as error:
            failures.append(f"{request_id}: {error.code().name}: {error.details()}")
            continue
        answers.append(Answer(started, time.monotonic(), request_id, response.policy_version, response.decision))


def scraped_versions(mesh: Mesh, policy: str) -> list[str]:
    """The versions the router's `auditmesh_router_policy_info` names for `policy` (one when correct)."""
    return [dict(labels)["version"] for (name, labels), value in scrape(mesh.metrics_port("router")).items()
            if name == "auditmesh_router_policy_info" and dict(labels)["policy"] == policy and value == 1]


def possibly_active(activations: list[tuple[float, float, str]], answer: Answer) -> bool:
    """Was answer.version active at some moment of the answer's lifetime? Activation i takes effect
    somewhere inside its call [sent_i, done_i], so its version may be live from sent_i until the
    next activation's done."""
    for index, (sent, _, version) in enumerate(activations):
        until = activations[index + 1][1] if index + 1 < len(activations) else float("inf")
        if version == answer.version and sent <= answer.finished and answer.started <= until:
            return True
    return False


async def test_policy_swaps_under_load_fail_nothing_and_use_one_live_version(mesh: Mesh) -> None:
    async with grpc.aio.insecure_channel(mesh.address("router")) as channel, \
            grpc.aio.insecure_channel(mesh.admin_address) as admin_channel:  # PolicyAdmin: its own port
        admin, stub = apb_grpc.PolicyAdminStub(admin_channel), pb_grpc.ModerationServiceStub(channel)
        await setup_swap_policy(admin)
        assert await asyncio.to_thread(scraped_versions, mesh, POLICY) == [version_name(0)]
        answers: list[Answer] = []
        failures: list[str] = []
        stop = asyncio.Event()
        workers = [asyncio.create_task(load(stub, stop, answers, failures, w)) for w in range(6)]
        await asyncio.sleep(0.3)
        activations = [(0.0, 0.0, version_name(0))]
        for i in range(1, SWAPS + 1):
            sent = time.monotonic()
            await admin.Activate(apb.ActivateRequest(kind=apb.POLICY, name=POLICY, version=version_name(i)), metadata=ADMIN)
            activations.append((sent, time.monotonic(), version_name(i)))
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)
        stop.set()
        await asyncio.gather(*workers)
        assert await asyncio.to_thread(scraped_versions, mesh, POLICY) == [version_name(SWAPS)]  # follows the swaps

        assert not failures, failures[:5]
        assert len(answers) > 300, len(answers)
        seen = {a.version for a in answers}
        assert len(seen) > 30, f"only {len(seen)} versions answered; swaps did not interleave with the load"
        for answer in answers:
            assert possibly_active(activations, answer), answer
            # One version from start to end: the decision is the one that version's blocklist makes.
            assert answer.decision == (pb.BLOCK if blocks_bluefin(answer.version) else pb.ALLOW), answer

        records = await all_audit_records(admin, "lifecycle")
        audited = {r.request_id: r.policy_version for r in records}
        assert all(audited.get(a.request_id) == a.version for a in answers)
        assert not any(r.content for r in records) and all(TEXT not in str(r) for r in records[:50])
        other = await admin.QueryAudit(apb.QueryAuditRequest(tenant="tenant-a", since=activations[1][0]), metadata=ADMIN)
        assert all(r.tenant == "tenant-a" for r in other.records)


async def all_audit_records(admin: apb_grpc.PolicyAdminStub, tenant: str) -> list[apb.AuditRecord]:
    records: list[apb.AuditRecord] = []
    token = ""
    while True:
        page = await admin.QueryAudit(apb.QueryAuditRequest(tenant=tenant, limit=1000, page_token=token), metadata=ADMIN)
        records.extend(page.records)
        token = page.next_page_token
        if not token:
            return records


async def moderate_many(stub: pb_grpc.ModerationServiceStub, prefix: str, count: int) -> list[pb.ModerateResponse]:
    async def one(i: int) -> pb.ModerateResponse:
        item = pb.Item(id=f"{prefix}-{i}", parts=[pb.Part(text=TEXT)])
        return await stub.Moderate(pb.ModerateRequest(item=item), metadata=[("x-api-key", KEY)], timeout=10.0)
    return list(await asyncio.gather(*(one(i) for i in range(count))))


async def test_shadow_canary_reports_disagreements_and_a_bad_candidate_is_rolled_back(mesh: Mesh) -> None:
    async with grpc.aio.insecure_channel(mesh.address("router")) as channel, \
            grpc.aio.insecure_channel(mesh.admin_address) as admin_channel:  # PolicyAdmin: its own port
        admin, stub = apb_grpc.PolicyAdminStub(admin_channel), pb_grpc.ModerationServiceStub(channel)
        await setup_swap_policy(admin)
        await admin.Activate(apb.ActivateRequest(kind=apb.POLICY, name=POLICY, version="s000"), metadata=ADMIN)
        # Shadow: the candidate (s001, does not block bluefin) judges every item; answers stay s000's.
        await admin.StartCanary(apb.StartCanaryRequest(policy=POLICY, candidate_version="s001", percent=100, shadow=True,
                                                       bounds=apb.CanaryBounds(min_samples=1000)), metadata=ADMIN)
        responses = await moderate_many(stub, "shadow", 30)
        assert {(r.policy_version, r.decision) for r in responses} == {("s000", pb.BLOCK)}
        status = await admin.GetCanary(apb.GetCanaryRequest(policy=POLICY), metadata=ADMIN)
        assert status.running and status.shadow_items >= 30 and status.decision_disagreements >= 30
        [watch] = [d for d in status.disagreements if d.category == "custom.watch"]
        assert watch.count >= 30 and watch.example_item_ids and watch.example_item_ids[0].startswith("shadow-")
        assert status.candidate.block_rate == 0.0 and status.baseline.block_rate == 1.0
        await admin.StopCanary(apb.StopCanaryRequest(policy=POLICY), metadata=ADMIN)

        # Live canary of the same candidate: its block rate departs from the baseline's → rolled back.
        await admin.StartCanary(apb.StartCanaryRequest(policy=POLICY, candidate_version="s001", percent=50,
                                                       bounds=apb.CanaryBounds(min_samples=10, max_block_rate_delta=0.3)),
                                metadata=ADMIN)
        during = await moderate_many(stub, "live", 80)
        assert {r.policy_version for r in during} == {"s000", "s001"}
        status = await admin.GetCanary(apb.GetCanaryRequest(policy=POLICY), metadata=ADMIN)
        assert not status.running and status.stopped_reason.startswith("auto-rollback: candidate block rate 0.00 vs baseline 1.00")
        after = await moderate_many(stub, "after", 20)
        assert {r.policy_version for r in after} == {"s000"}
        stored = await wait_for(lambda: admin.GetCanary(apb.GetCanaryRequest(policy=POLICY), metadata=ADMIN),
                                lambda s: "auto-rollback" in s.stopped_reason and not s.running)
        assert stored.candidate.items >= 10


async def wait_for(call: Any, done: Any, timeout_s: float = 5.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        result = await call()
        if done(result) or time.monotonic() > deadline:
            return result
        await asyncio.sleep(0.1)


async def text_load(client: MeshTritonClient, stop: asyncio.Event, versions: list[list[list[str]]],
                    failures: list[str]) -> None:
    tensor = InferInput("TEXT", [1, 1], "BYTES")
    tensor.set_data_from_numpy(np.array([[b"you stupid idiot"]], dtype=object))
    while not stop.is_set():
        try:
            result = await client.infer("text_moderation", [tensor], client_timeout=10.0)
        except InferenceServerException as error:
            failures.append(str(error))
            continue
        versions.append(json.loads(result.get_response().parameters["models"].string_param))


async def test_model_reload_through_the_router_under_load(mesh: Mesh) -> None:
    async with grpc.aio.insecure_channel(mesh.address("router")) as channel, \
            grpc.aio.insecure_channel(mesh.address("text")) as text_channel:
        stub = pb_grpc.ModerationServiceStub(channel)
        answers: list[Answer] = []
        failures: list[str] = []
        stop = asyncio.Event()
        workers = [asyncio.create_task(load(stub, stop, answers, failures, w, text="hello there", key="test-key-tenant-a"))
                   for w in range(4)]
        await asyncio.sleep(0.3)
        repository = _repository_stub(text_channel)
        await repository.RepositoryModelLoad(service_pb2.RepositoryModelLoadRequest(model_name="text_moderation"),
                                             metadata=mesh.internal_metadata(admin=True))
        await asyncio.sleep(0.3)
        stop.set()
        await asyncio.gather(*workers)
        assert not failures, failures[:5]
        response = await stub.Moderate(pb.ModerateRequest(item=pb.Item(id="x", parts=[pb.Part(text="hi")])),
                                       metadata=[("x-api-key", "test-key-tenant-a")])
        reloaded = next_version(TextModerationModel.version)
        assert ("text_moderation", reloaded) in {(m.name, m.version) for m in response.models}
        index = await repository.RepositoryIndex(service_pb2.RepositoryIndexRequest(), metadata=mesh.internal_metadata())
        assert sorted((m.name, m.version, m.state) for m in index.models) == [
            ("text_moderation", reloaded, "READY"), ("text_semantic", TextSemanticModel.version, "READY")]


def _repository_stub(channel: grpc.aio.Channel) -> Any:
    from tritonclient.grpc import service_pb2_grpc
    return service_pb2_grpc.GRPCInferenceServiceStub(channel)


def _add_version(repository: Path, name: str, version: str, onnx: bytes) -> None:
    """Install `onnx` as <name>/<version> with a correct checksum and make it the default."""
    target = repository / name / version / "model.onnx"
    target.parent.mkdir(parents=True)
    target.write_bytes(onnx)
    config_path = repository / name / "config.json"
    config = json.loads(config_path.read_text())
    config["versions"][version] = {**config["versions"][config["default_version"]], "sha256": sha256_of(target)}
    config["default_version"] = version
    config_path.write_text(json.dumps(config))


async def test_text_model_reload_and_a_broken_file_keeps_the_old_version(tmp_path: Path) -> None:
    repository = tmp_path / "repository"
    for name in text_repository_models():
        shutil.copytree(ROOT / "model_repository" / name, repository / name)
    text = Mesh(base_port=free_base_port(), extra_env={"AUDITMESH_MODEL_REPOSITORY": str(repository)})
    text.start_service("text")
    try:
        text.wait_serving("text", 120.0)
        client = MeshTritonClient(triton_aio.InferenceServerClient(text.address("text")), text.internal_metadata())
        versions: list[list[list[str]]] = []
        failures: list[str] = []
        stop = asyncio.Event()
        workers = [asyncio.create_task(text_load(client, stop, versions, failures)) for _ in range(3)]
        await asyncio.sleep(0.3)
        _add_version(repository, "toxicity_en", "2", (repository / "toxicity_en" / "1" / "model.onnx").read_bytes())
        async with grpc.aio.insecure_channel(text.address("text")) as channel:
            stub = _repository_stub(channel)
            await stub.RepositoryModelLoad(service_pb2.RepositoryModelLoadRequest(model_name="text_moderation"),
                                           metadata=text.internal_metadata(admin=True))
            await asyncio.sleep(0.3)
            served = len(versions)
            reloaded = next_version(dict((n, v) for n, v in versions[0])["text_moderation"])  # the class's + 1
            assert ["toxicity_en", "2"] in versions[-1] and ["text_moderation", reloaded] in versions[-1]
            assert ["toxicity_en", "1"] in versions[0]

            _add_version(repository, "toxicity_en", "3", b"this is not an ONNX model")
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await stub.RepositoryModelLoad(service_pb2.RepositoryModelLoadRequest(model_name="text_moderation"),
                                           metadata=text.internal_metadata(admin=True))
            assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
            message = caught.value.details() or ""
            assert "toxicity_en/3/model.onnx" in message and f"(version {reloaded} still serving)" in message, message
            await asyncio.sleep(0.3)
            index = await stub.RepositoryIndex(service_pb2.RepositoryIndexRequest(), metadata=text.internal_metadata())
            [entry] = [m for m in index.models if m.name == "text_moderation"]
            assert (entry.version, entry.state) == (reloaded, "READY") and "load failed" in entry.reason
        stop.set()
        await asyncio.gather(*workers)
        await client.close()
        assert not failures, failures[:3]
        assert len(versions) > served and ["toxicity_en", "2"] in versions[-1]  # still answering, on version 2
    finally:
        text.stop()
