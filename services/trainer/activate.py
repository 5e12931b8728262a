"""`auditmesh classifier activate`: put a trained tenant classifier to work through the mesh's own APIs
(issue 40; docs/tenant-classifiers.md):

1. the text service loads it: KServe `RepositoryModelLoad` of `classifier.<tenant>.<version>` (the mesh's
   internal admin secret), from the classifier directory in its `tenant_classifiers` folder, without a
   restart and beside any other version (the one the active policy reads keeps serving), then says which
   version it serves (ModelMetadata, the internal service secret): it must be this one;
2. a new version of the tenant's policy reads it (`tenant_classifier`, pinned to this version; each custom category the policy
   has no thresholds for gets `review` at the classifier's own threshold), put through the PolicyAdmin API
   as the tenant's own version (`<tenant>:<base>+clf-<classifier version>`);
3. that version runs as a shadow canary (`shadow`: scored and counted, never acting), a canary on a share
   of the tenant's items (`canary`), or becomes the tenant's active version (`full`: the tenant's own
   pointer, so other tenants of the same policy are not affected).

`policy_reading` is the pure part (tested directly); `activate` is the thin gRPC adapter.

Example::

    activate(Path("var/classifiers/acme/68b7e413a4f1"), Activation("default", "shadow"), Endpoints("127.0.0.1:8101", "127.0.0.1:8105"),
             admin_key="...", internal=InternalSecrets(service="...", admin="..."))
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import grpc
import yaml
from auditmesh.v1 import admin_pb2 as apb
from auditmesh.v1 import admin_pb2_grpc as apb_grpc
from tritonclient.grpc import service_pb2, service_pb2_grpc

from auditmesh.client.settings import ClientTls, blocking_channel
from services.common.contracts.classifier import model_name
from services.common.internal_auth import ADMIN_SECRET_HEADER, SECRET_HEADER
from services.common.taxonomy import is_custom_category
from services.trainer.artifact import load

__all__ = ["Activation", "ActivationError", "Endpoints", "InternalSecrets", "Stage", "activate", "candidate_version",
           "policy_reading"]

Stage = Literal["shadow", "canary", "full"]
#: What a policy version id derived by `activate` carries before the classifier's version.
CLASSIFIER_MARK = "+clf-"
#: How long each call may take (a classifier load warms the encoder: seconds on a busy machine).
CALL_TIMEOUT_S = 60.0


class ActivationError(RuntimeError):
    """A step failed; the message names the step and what the service said."""


@dataclass(frozen=True)
class Activation:
    """What to do: the policy to derive from, the stage, the canary's share, how the scores count."""

    policy: str
    stage: Stage
    percent: float = 10.0
    mode: Literal["add", "replace"] = "add"
    #: Shadow: end the canary by itself once the candidate decides differently on more than this share of
    #: the items (0 = the router's default bound).
    max_disagreement: float = 0.0

    def __post_init__(self) -> None:
        if self.stage == "canary" and not 0.0 < self.percent <= 100.0:
            raise ValueError(f"canary percent must be in (0, 100], got {self.percent}")
        if not 0.0 <= self.max_disagreement <= 1.0:
            raise ValueError(f"max_disagreement must be in [0, 1], got {self.max_disagreement}")


@dataclass(frozen=True)
class Endpoints:
    """The text service's KServe port and the router's PolicyAdmin port."""

    text: str
    admin: str


@dataclass(frozen=True)
class InternalSecrets:
    """The mesh's internal secrets (`make run` writes them to var/secrets/): the service secret for KServe
    calls, the admin secret for RepositoryModelLoad."""

    service: str
    admin: str

    def __repr__(self) -> str:
        return "InternalSecrets(<hidden>)"


def candidate_version(base_version: str, tenant: str, classifier_version: str) -> str:
    """The new policy version's id: `<tenant>:` (a tenant's own version: a tenant-scoped admin key may store
    it, and it is activated or canaried only in that tenant's scope), the base version without an earlier
    tenant prefix or classifier, then the classifier's version; at most 64 characters.

    Example::

        >>> candidate_version("2026-12-02.1", "acme", "9f2e1b7d0c4a")
        'acme:2026-12-02.1+clf-9f2e1b7d0c4a'
        >>> candidate_version("acme:2026-12-02.1+clf-9f2e1b7d0c4a", "acme", "0b1c2d3e4f5a")
        'acme:2026-12-02.1+clf-0b1c2d3e4f5a'
    """
    prefix, suffix = f"{tenant}:", f"{CLASSIFIER_MARK}{classifier_version}"
    if len(prefix) + len(suffix) > 60:
        raise ValueError(f"tenant {tenant!r} and classifier version {classifier_version!r} are too long for a policy "
                         f"version id (64 characters)")
    base = base_version.split(CLASSIFIER_MARK)[0]
    base = base[len(prefix):] if base.startswith(prefix) else base
    return prefix + base[:64 - len(prefix) - len(suffix)] + suffix


def policy_reading(document: dict[str, Any], *, tenant: str, classifier_version: str, thresholds: dict[str, float],
                   mode: str = "add") -> dict[str, Any]:
    """A copy of the policy `document` (parsed YAML) as a new version that reads the tenant's classifier:
    `tenant_classifier: {version, mode}`, and for each custom category in `thresholds` (the classifier's own) that
    the policy sets nothing for, `review` at that threshold. Built-in categories keep the policy's
    thresholds.

    Example::

        >>> policy_reading({"name": "p", "version": "1", "categories": {}}, tenant="acme", classifier_version="abc",
        ...                thresholds={"custom.crypto_scam": 0.42, "spam": 0.5})["categories"]
        {'custom.crypto_scam': {'review': 0.42}}
    """
    out = copy.deepcopy(document)
    out["version"] = candidate_version(str(document.get("version", "")), tenant, classifier_version)
    out["tenant_classifier"] = {"version": classifier_version, "mode": mode}
    categories = out.setdefault("categories", {}) or {}
    out["categories"] = categories
    for category, threshold in sorted(thresholds.items()):
        if is_custom_category(category) and category not in categories:
            categories[category] = {"review": round(float(threshold), 4)}
    return out


def activate(directory: Path, activation: Activation, endpoints: Endpoints, *, admin_key: str,
             internal: InternalSecrets, admin_tls: ClientTls | None = None) -> dict[str, Any]:
    """Run the three steps (module docstring) for the classifier in `directory`; a summary of what was done.
    ArtifactError for a classifier that does not load; ActivationError naming the failed step. `admin_tls`:
    TLS to the router's admin port (the text service's internal port is reached in plaintext)."""
    classifier = load(directory)
    tenant, model = classifier.tenant, model_name(classifier.tenant, classifier.version)
    thresholds = {c: float(classifier.thresholds[k]) for k, c in enumerate(classifier.categories)}
    with grpc.insecure_channel(endpoints.text) as text:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(text)
        _call(f"loading {model} on the text service at {endpoints.text}", stub.RepositoryModelLoad,
              service_pb2.RepositoryModelLoadRequest(model_name=model), [(ADMIN_SECRET_HEADER, internal.admin)])
        served = _call(f"checking {model} on the text service", stub.ModelMetadata,
                       service_pb2.ModelMetadataRequest(name=model), [(SECRET_HEADER, internal.service)])
    if classifier.version not in served.versions:
        raise ActivationError(f"the text service serves {model} at {list(served.versions)}, not {classifier.version}: "
                              f"is {directory} in its tenant_classifiers folder?")
    metadata = [("x-admin-key", admin_key)]
    with blocking_channel(endpoints.admin, admin_tls) as channel:
        admin = apb_grpc.PolicyAdminStub(channel)
        base = _call(f"reading policy {activation.policy!r} for tenant {tenant!r}", admin.GetVersion,
                     apb.GetVersionRequest(kind=apb.POLICY, name=activation.policy, tenant=tenant), metadata)
        document = policy_reading(yaml.safe_load(base.content), tenant=tenant, classifier_version=classifier.version,
                                  thresholds=thresholds, mode=activation.mode)
        version = str(document["version"])
        _call(f"putting policy {activation.policy}@{version}", admin.PutVersion,
              apb.PutVersionRequest(kind=apb.POLICY, name=activation.policy, activate=False,
                                    content=yaml.safe_dump(document, allow_unicode=True, sort_keys=False),
                                    comment=f"reads classifier.{tenant} {classifier.version}"), metadata)
        comment = f"auditmesh classifier activate --{activation.stage}"
        if activation.stage == "full":
            _call(f"activating {activation.policy}@{version} for tenant {tenant!r}", admin.Activate,
                  apb.ActivateRequest(kind=apb.POLICY, name=activation.policy, version=version, tenant=tenant,
                                      comment=comment), metadata)
        else:
            shadow = activation.stage == "shadow"
            _call(f"starting the {activation.stage} canary of {activation.policy}@{version}", admin.StartCanary,
                  apb.StartCanaryRequest(policy=activation.policy, tenant=tenant, candidate_version=version,
                                         percent=100.0 if shadow else activation.percent, shadow=shadow,
                                         bounds=apb.CanaryBounds(max_decision_disagreement_rate=activation.max_disagreement),
                                         comment=comment), metadata)
    return {"tenant": tenant, "model": model, "classifier_version": classifier.version, "policy": activation.policy,
            "base_version": base.info.version, "policy_version": version, "stage": activation.stage,
            "percent": 100.0 if activation.stage == "shadow" else activation.percent if activation.stage == "canary" else None}


def _call(step: str, method: Any, request: Any, metadata: list[tuple[str, str]]) -> Any:
    try:
        return method(request, metadata=metadata, timeout=CALL_TIMEOUT_S)
    except grpc.RpcError as error:
        raise ActivationError(f"{step}: {error.code().name}: {error.details()}") from None
