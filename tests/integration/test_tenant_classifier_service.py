"""A tenant classifier trained with `auditmesh classifier train` is served by a real text service process
(KServe v2 over gRPC on loopback) beside the text models, as `classifier.<tenant>` at its version; a real
router reads it for a policy that says `tenant_classifier`: first as a shadow canary (counted, not acting),
then active (it blocks on the custom category, cites the classifier, names its version), and a tenant
never reads another tenant's classifier."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import grpc
import numpy as np
import pytest
import tritonclient.grpc as triton
import yaml
from auditmesh.v1 import admin_pb2 as apb
from auditmesh.v1 import admin_pb2_grpc as apb_grpc
from auditmesh.v1 import moderation_pb2 as pb
from auditmesh.v1 import moderation_pb2_grpc as pb_grpc

from services.common.contracts.classifier import decode_scores
from services.launcher import ROOT, Mesh, free_base_port
from services.router.tenants import hash_key
from services.trainer.commands import train_from_file
from tests.stubs import MeshTritonClient
from tests.unit.trainer.conftest import labelled

pytestmark = pytest.mark.slow

ADMIN = [("x-admin-key", "demo-admin-key")]  # config/router.yaml's loopback demo admin key
SCAM = "we see you at the token giveaway tomorrow"


def reading_policy(path: Path, version: str, thresholds: dict[str, float]) -> str:
    """The shipped policy at `path` as a new version that reads the tenant's classifier."""
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    document["version"] = version
    document["tenant_classifier"] = {"mode": "add"}
    document["categories"]["custom.crypto_scam"] = thresholds
    return yaml.safe_dump(document, allow_unicode=True)


def moderate(stub: pb_grpc.ModerationServiceStub, key: str, text: str, item_id: str) -> pb.ModerateResponse:
    response: pb.ModerateResponse = stub.Moderate(pb.ModerateRequest(item=pb.Item(id=item_id, parts=[pb.Part(text=text)])),
                                                  metadata=[("x-api-key", key)], timeout=20.0)
    return response


def category(response: pb.ModerateResponse, name: str) -> pb.CategoryResult | None:
    return next((c for c in response.categories if c.category == name), None)


def test_the_text_service_serves_a_trained_tenant_classifier(tmp_path: Path) -> None:
    examples = tmp_path / "labels.jsonl"
    examples.write_text("".join(json.dumps({"text": e.text, "labels": dict(e.labels)}) + "\n" for e in labelled(240)),
                        encoding="utf-8")
    summary = train_from_file(examples, tenant="acme", out=tmp_path / "classifiers" / "acme", nice=0)
    config = tmp_path / "config"
    shutil.copytree(ROOT / "config", config)
    text_yaml = (config / "text.yaml").read_text(encoding="utf-8")
    assert 'tenant_classifiers: ""' in text_yaml
    (config / "text.yaml").write_text(text_yaml.replace('tenant_classifiers: ""',
                                                        f"tenant_classifiers: {tmp_path / 'classifiers'}"),
                                      encoding="utf-8")
    text = Mesh(base_port=free_base_port(), config_dir=config)
    text.start_service("text")
    try:
        text.wait_serving("text", 120.0)
        client = MeshTritonClient(triton.InferenceServerClient(text.address("text")), text.internal_metadata())
        assert client.get_model_metadata("classifier.acme").versions == [summary["version"]]
        tensor = triton.InferInput("TEXT", [2, 1], "BYTES")
        tensor.set_data_from_numpy(np.array([[b"claim free crypto airdrop token dm"], [b"see you at lunch tomorrow"]],
                                            dtype=object))
        scores = client.infer("classifier.acme", [tensor]).as_numpy("SCORES")
        rows = [decode_scores(value[0]) for value in scores]
        assert [r["custom.crypto_scam"][1] for r in rows] == [True, False]
        assert client.is_model_ready("text_moderation")  # the text models are served beside it
        router = text.routers[0]
        text.start_service(router)
        text.wait_serving(router, 120.0)
        with grpc.insecure_channel(text.address(router)) as public, grpc.insecure_channel(text.admin_address) as admin_channel:
            stub, admin = pb_grpc.ModerationServiceStub(public), apb_grpc.PolicyAdminStub(admin_channel)
            _shadow_then_active(stub, admin, config, summary["version"])
            _other_tenants_never_read_it(stub, admin, config)
    finally:
        text.stop()


def _shadow_then_active(stub: pb_grpc.ModerationServiceStub, admin: apb_grpc.PolicyAdminStub, config: Path,
                        version: str) -> None:
    """acme's default policy, as a version that blocks custom.crypto_scam >= 0.5: shadow first, then active."""
    candidate = reading_policy(config / "policies" / "default.yaml", "with-classifier", {"block": 0.5})
    admin.PutVersion(apb.PutVersionRequest(kind=apb.POLICY, name="default", content=candidate, activate=False), metadata=ADMIN)
    admin.StartCanary(apb.StartCanaryRequest(policy="default", candidate_version="with-classifier", percent=100, shadow=True,
                                             bounds=apb.CanaryBounds(min_samples=1000)), metadata=ADMIN)
    shadowed = moderate(stub, "demo-acme-key", SCAM, "shadow-1")
    assert shadowed.decision != pb.BLOCK and category(shadowed, "custom.crypto_scam") is None  # the active policy ignores it
    assert "classifier.acme" not in {m.name for m in shadowed.models}
    status = admin.GetCanary(apb.GetCanaryRequest(policy="default"), metadata=ADMIN)
    assert status.shadow_items >= 1 and status.decision_disagreements >= 1  # the candidate would have blocked it
    admin.StopCanary(apb.StopCanaryRequest(policy="default"), metadata=ADMIN)
    admin.Activate(apb.ActivateRequest(kind=apb.POLICY, name="default", version="with-classifier"), metadata=ADMIN)

    blocked = moderate(stub, "demo-acme-key", SCAM, "active-1")
    scam = category(blocked, "custom.crypto_scam")
    assert blocked.policy_version == "with-classifier" and blocked.decision == pb.BLOCK and not blocked.degraded
    assert scam is not None and scam.action == pb.BLOCK and scam.rule == "categories.custom.crypto_scam.block >= 0.5"
    cited = [e.text_span for e in blocked.evidence if e.category == "custom.crypto_scam"]
    assert [(span.lexicon, span.start, span.end) for span in cited] == [("classifier.acme", 0, len(SCAM))]
    assert ("classifier.acme", version) in {(m.name, m.version) for m in blocked.models}
    lunch = moderate(stub, "demo-acme-key", "see you at lunch tomorrow", "active-2")
    calm = category(lunch, "custom.crypto_scam")
    assert lunch.decision == pb.ALLOW and calm is not None and calm.action == pb.ALLOW


def _other_tenants_never_read_it(stub: pb_grpc.ModerationServiceStub, admin: apb_grpc.PolicyAdminStub, config: Path) -> None:
    """Another tenant's policy reads *its own* classifier, which does not exist: acme's is never asked, the
    stage fails open."""
    strict = reading_policy(config / "policies" / "strict.yaml", "with-classifier", {"block": 0.5})
    admin.PutVersion(apb.PutVersionRequest(kind=apb.POLICY, name="strict", content=strict, activate=True), metadata=ADMIN)
    tenants = yaml.safe_load(admin.GetVersion(apb.GetVersionRequest(kind=apb.TENANTS), metadata=ADMIN).content)
    tenants["tenants"].append({"id": "initech", "api_key_sha256": hash_key("initech-key"), "policies": ["strict"],
                               "qos_class": "standard"})
    tenants["version"] = "with-initech"
    admin.PutVersion(apb.PutVersionRequest(kind=apb.TENANTS, content=yaml.safe_dump(tenants), activate=True), metadata=ADMIN)
    response = moderate(stub, "initech-key", SCAM, "initech-1")
    assert response.policy_version == "with-classifier"
    scam = category(response, "custom.crypto_scam")
    assert scam is not None and scam.action == pb.ALLOW and scam.score == 0.0
    assert [(d.stage, d.handling) for d in response.degradations] == [("classifier", "fail_open")]
    assert "classifier.acme" not in {m.name for m in response.models}
