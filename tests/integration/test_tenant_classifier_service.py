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


def reading_policy(path: Path, version: str, classifier_version: str, thresholds: dict[str, float]) -> str:
    """The shipped policy at `path` as a new version that reads the tenant's classifier at `classifier_version`."""
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    document["version"] = version
    document["tenant_classifier"] = {"version": classifier_version, "mode": "add"}
    document["categories"]["custom.crypto_scam"] = thresholds
    return yaml.safe_dump(document, allow_unicode=True)


def moderate(stub: pb_grpc.ModerationServiceStub, key: str, text: str, item_id: str) -> pb.ModerateResponse:
    response: pb.ModerateResponse = stub.Moderate(pb.ModerateRequest(item=pb.Item(id=item_id, parts=[pb.Part(text=text)])),
                                                  metadata=[("x-api-key", key)], timeout=20.0)
    return response


def category(response: pb.ModerateResponse, name: str) -> pb.CategoryResult | None:
    return next((c for c in response.categories if c.category == name), None)


def models(response: pb.ModerateResponse) -> set[tuple[str, str]]:
    return {(m.name, m.version) for m in response.models}


def write_labels(path: Path, count: int, seed: int) -> Path:
    path.write_text("".join(json.dumps({"text": e.text, "labels": dict(e.labels)}) + "\n" for e in labelled(count, seed)),
                    encoding="utf-8")
    return path


def test_a_classifier_trained_after_start_is_loaded_tried_in_shadow_then_acts(tmp_path: Path) -> None:
    classifiers = tmp_path / "classifiers"
    classifiers.mkdir()
    config = tmp_path / "config"
    shutil.copytree(ROOT / "config", config)
    text_yaml = (config / "text.yaml").read_text(encoding="utf-8")
    assert "tenant_classifiers: var/classifiers" in text_yaml
    assert "tenant_classifier_budget_mb: 512" in text_yaml
    # a memory budget that holds one classifier at most: loading one evicts the other, a request loads it back
    (config / "text.yaml").write_text(text_yaml.replace("tenant_classifiers: var/classifiers", f"tenant_classifiers: {classifiers}")
                                      .replace("tenant_classifier_budget_mb: 512", "tenant_classifier_budget_mb: 0.001"),
                                      encoding="utf-8")
    mesh = Mesh(base_port=free_base_port(), config_dir=config)
    router = mesh.routers[0]
    try:
        mesh.start_services(["text", router], 120.0)
        # Labels into the router's store, trained while the mesh serves, put to work without a restart.
        examples = write_labels(tmp_path / "labels.jsonl", 240, seed=0)
        imported = import_labels(examples, "acme", mesh.admin_address, admin_key="demo-admin-key", reviewer="rev-1")
        assert (imported["added"], imported["tenant_total"]) == (240, 240)  # the router's label store keeps them
        again = import_labels(examples, "acme", mesh.admin_address, admin_key="demo-admin-key")
        assert (again["added"], again["replaced"], again["tenant_total"]) == (0, 240, 240)  # by item id: no duplicates
        stored = export_examples("acme", mesh.admin_address, admin_key="demo-admin-key")
        assert sorted((e.text, dict(e.labels)) for e in stored) == sorted((e.text, dict(e.labels)) for e in labelled(240))
        first = train_examples(stored, tenant="acme", into=classifiers)
        assert Path(first["path"]) == classifiers / "acme" / first["version"]
        endpoints = Endpoints(mesh.address("text"), mesh.admin_address)
        secret = InternalSecrets(dict(mesh.internal_metadata())[SECRET_HEADER],
                                 dict(mesh.internal_metadata(admin=True))[ADMIN_SECRET_HEADER])
        with pytest.raises(ActivationError, match="loading classifier.acme.* UNAUTHENTICATED"):
            activate(Path(first["path"]), Activation("default", "shadow"), endpoints, admin_key="demo-admin-key",
                     internal=InternalSecrets(secret.service, "not-the-mesh-secret-at-all"))
        shadow = activate(Path(first["path"]), Activation("default", "shadow"), endpoints, admin_key="demo-admin-key",
                          internal=secret)
        assert shadow["policy_version"] == f"acme:{shadow['base_version']}+clf-{first['version']}"

        name = f"classifier.acme.{first['version']}"
        client = MeshTritonClient(triton.InferenceServerClient(mesh.address("text")), mesh.internal_metadata())
        assert client.get_model_metadata(name).versions == [first["version"]]
        tensor = triton.InferInput("TEXT", [2, 1], "BYTES")
        tensor.set_data_from_numpy(np.array([[b"claim free crypto airdrop token dm"], [b"see you at lunch tomorrow"]],
                                            dtype=object))
        rows = [decode_scores(value[0]) for value in client.infer(name, [tensor]).as_numpy("SCORES")]
        assert [r["custom.crypto_scam"][1] for r in rows] == [True, False]
        assert client.is_model_ready("text_moderation")  # the text models are served beside it

        with grpc.insecure_channel(mesh.address(router)) as public, grpc.insecure_channel(mesh.admin_address) as channel:
            stub, admin = pb_grpc.ModerationServiceStub(public), apb_grpc.PolicyAdminStub(channel)
            _shadow_counts_then_full_acts(stub, admin, endpoints, secret, first["version"], Path(first["path"]))
            # Retrained on more labels: a new version, tried in shadow while the active policy keeps reading the first.
            more = write_labels(tmp_path / "more.jsonl", 300, seed=1)
            import_labels(more, "acme", mesh.admin_address, admin_key="demo-admin-key")
            second = train_examples(export_examples("acme", mesh.admin_address, admin_key="demo-admin-key"),
                                    tenant="acme", into=classifiers)
            assert second["version"] != first["version"] and Path(first["path"]).is_dir()  # the first is kept
            activate(Path(second["path"]), Activation("default", "shadow"), endpoints, admin_key="demo-admin-key",
                     internal=secret)
            index = {m.name: m for m in client.get_model_repository_index().models}
            assert index[name].state == "UNAVAILABLE" and index[name].reason.startswith("evicted: over the memory budget")
            answered = moderate(stub, "demo-acme-key", SCAM, "retrained-1")  # the evicted classifier, loaded back for it
            assert (f"classifier.acme.{first['version']}", first["version"]) in models(answered) and not answered.degraded
            assert not any(second["version"] in n for n, _ in models(answered))  # the candidate's scores never act
            status = admin.GetCanary(apb.GetCanaryRequest(policy="default", tenant="acme"), metadata=ADMIN)
            assert status.running and status.shadow and status.candidate_version.endswith(second["version"])
            _other_tenants_never_read_it(stub, admin, config, first["version"])
    finally:
        mesh.stop()


def _shadow_counts_then_full_acts(stub: pb_grpc.ModerationServiceStub, admin: apb_grpc.PolicyAdminStub,
                                  endpoints: Endpoints, secret: InternalSecrets, version: str, directory: Path) -> None:
    """In shadow the active version ignores the classifier and the canary counts where the candidate differs;
    activated for acme (`--full`), it reviews custom.crypto_scam at the classifier's own threshold."""
    name = f"classifier.acme.{version}"
    shadowed = moderate(stub, "demo-acme-key", SCAM, "shadow-1")
    assert category(shadowed, "custom.crypto_scam") is None  # the active policy ignores it
    assert name not in {n for n, _ in models(shadowed)}
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
    assert [(span.lexicon, span.start, span.end) for span in cited] == [(name, 0, len(SCAM))]
    assert (name, version) in models(flagged)
    lunch = moderate(stub, "demo-acme-key", "see you at lunch tomorrow", "active-2")
    calm = category(lunch, "custom.crypto_scam")
    assert lunch.decision == pb.ALLOW and calm is not None and calm.action == pb.ALLOW


def _other_tenants_never_read_it(stub: pb_grpc.ModerationServiceStub, admin: apb_grpc.PolicyAdminStub, config: Path,
                                 version: str) -> None:
    """Another tenant's policy pinning the same version reads *its own* classifier, which does not exist:
    acme's is never asked, the stage fails open."""
    strict = reading_policy(config / "policies" / "strict.yaml", "with-classifier", version, {"block": 0.5})
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
    assert not any(n.startswith("classifier.acme") for n, _ in models(response))
