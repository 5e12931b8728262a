"""Reviewers' labels imported into a real router's label store (`auditmesh labels import`, SubmitLabels) train a
tenant classifier (`auditmesh classifier train --from-router`, ExportLabels) while the mesh serves; it is put to work by
`auditmesh classifier activate` without a restart: a real text service process loads it (KServe
RepositoryModelLoad) beside the text models as `classifier.<tenant>` at its version; a real router reads it
for the new policy version: first as a shadow canary (counted, not acting), then active for that tenant
(it reviews on the custom category, cites the classifier, names its version); and a tenant never reads
another tenant's classifier."""

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
from services.common.internal_auth import ADMIN_SECRET_HEADER, SECRET_HEADER
from services.launcher import ROOT, Mesh, free_base_port
from services.router.tenants import hash_key
from services.trainer.activate import Activation, ActivationError, Endpoints, InternalSecrets, activate
from services.trainer.commands import train_examples
from services.trainer.labels_client import export_examples, import_labels
from tests.stubs import MeshTritonClient
from tests.unit.trainer.conftest import labelled

pytestmark = pytest.mark.slow

ADMIN = [("x-admin-key", "demo-admin-key")]  # config/router.yaml's loopback demo admin key
SCAM = "claim free crypto airdrop token dm"


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


def test_a_classifier_trained_after_start_is_loaded_tried_in_shadow_then_acts(tmp_path: Path) -> None:
    classifiers = tmp_path / "classifiers"
    classifiers.mkdir()
    config = tmp_path / "config"
    shutil.copytree(ROOT / "config", config)
    text_yaml = (config / "text.yaml").read_text(encoding="utf-8")
    assert "tenant_classifiers: var/classifiers" in text_yaml
    (config / "text.yaml").write_text(text_yaml.replace("tenant_classifiers: var/classifiers", f"tenant_classifiers: {classifiers}"),
                                      encoding="utf-8")
    mesh = Mesh(base_port=free_base_port(), config_dir=config)
    router = mesh.routers[0]
    try:
        mesh.start_services(["text", router], 120.0)
        # Trained while the mesh serves, then put to work without a restart (auditmesh classifier activate).
        examples = tmp_path / "labels.jsonl"
        examples.write_text("".join(json.dumps({"text": e.text, "labels": dict(e.labels)}) + "\n" for e in labelled(240)),
                            encoding="utf-8")
        imported = import_labels(examples, "acme", mesh.admin_address, admin_key="demo-admin-key", reviewer="rev-1")
        assert (imported["added"], imported["tenant_total"]) == (240, 240)  # the router's label store keeps them
        again = import_labels(examples, "acme", mesh.admin_address, admin_key="demo-admin-key")
        assert (again["added"], again["replaced"], again["tenant_total"]) == (0, 240, 240)  # by item id: no duplicates
        stored = export_examples("acme", mesh.admin_address, admin_key="demo-admin-key")
        assert sorted((e.text, dict(e.labels)) for e in stored) == sorted((e.text, dict(e.labels)) for e in labelled(240))
        summary = train_examples(stored, tenant="acme", out=classifiers / "acme")
        endpoints = Endpoints(mesh.address("text"), mesh.admin_address)
        secret = InternalSecrets(dict(mesh.internal_metadata())[SECRET_HEADER],
                                 dict(mesh.internal_metadata(admin=True))[ADMIN_SECRET_HEADER])
        with pytest.raises(ActivationError, match="loading classifier.acme .*UNAUTHENTICATED"):
            activate(classifiers / "acme", Activation("default", "shadow"), endpoints, admin_key="demo-admin-key",
                     internal=InternalSecrets(secret.service, "not-the-mesh-secret-at-all"))
        shadow = activate(classifiers / "acme", Activation("default", "shadow"), endpoints, admin_key="demo-admin-key",
                          internal=secret)
        assert shadow["policy_version"] == f"acme:{shadow['base_version']}+clf-{summary['version']}"

        client = MeshTritonClient(triton.InferenceServerClient(mesh.address("text")), mesh.internal_metadata())
        assert client.get_model_metadata("classifier.acme").versions == [summary["version"]]
        tensor = triton.InferInput("TEXT", [2, 1], "BYTES")
        tensor.set_data_from_numpy(np.array([[b"claim free crypto airdrop token dm"], [b"see you at lunch tomorrow"]],
                                            dtype=object))
        rows = [decode_scores(value[0]) for value in client.infer("classifier.acme", [tensor]).as_numpy("SCORES")]
        assert [r["custom.crypto_scam"][1] for r in rows] == [True, False]
        assert client.is_model_ready("text_moderation")  # the text models are served beside it

        with grpc.insecure_channel(mesh.address(router)) as public, grpc.insecure_channel(mesh.admin_address) as channel:
            stub, admin = pb_grpc.ModerationServiceStub(public), apb_grpc.PolicyAdminStub(channel)
            _shadow_counts_then_full_acts(stub, admin, endpoints, secret, summary["version"], classifiers / "acme")
            _other_tenants_never_read_it(stub, admin, config)
    finally:
        mesh.stop()


def _shadow_counts_then_full_acts(stub: pb_grpc.ModerationServiceStub, admin: apb_grpc.PolicyAdminStub,
                                  endpoints: Endpoints, secret: InternalSecrets, version: str, directory: Path) -> None:
    """In shadow the active version ignores the classifier and the canary counts where the candidate differs;
    activated for acme (`--full`), it reviews custom.crypto_scam at the classifier's own threshold."""
    shadowed = moderate(stub, "demo-acme-key", SCAM, "shadow-1")
    assert category(shadowed, "custom.crypto_scam") is None  # the active policy ignores it
    assert "classifier.acme" not in {m.name for m in shadowed.models}
    status = admin.GetCanary(apb.GetCanaryRequest(policy="default", tenant="acme"), metadata=ADMIN)
    assert status.running and status.shadow_items >= 1
    assert any(d.category == "custom.crypto_scam" and "shadow-1" in d.example_item_ids for d in status.disagreements)
    admin.StopCanary(apb.StopCanaryRequest(policy="default", tenant="acme"), metadata=ADMIN)
    full = activate(directory, Activation("default", "full"), endpoints, admin_key="demo-admin-key", internal=secret)

    flagged = moderate(stub, "demo-acme-key", SCAM, "active-1")
    scam = category(flagged, "custom.crypto_scam")
    assert flagged.policy_version == full["policy_version"] and not flagged.degraded
    assert scam is not None and scam.action == pb.REVIEW and scam.rule.startswith("categories.custom.crypto_scam.review >= ")
    assert flagged.decision in (pb.REVIEW, pb.BLOCK)
    cited = [e.text_span for e in flagged.evidence if e.category == "custom.crypto_scam"]
    assert [(span.lexicon, span.start, span.end) for span in cited] == [("classifier.acme", 0, len(SCAM))]
    assert ("classifier.acme", version) in {(m.name, m.version) for m in flagged.models}
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
