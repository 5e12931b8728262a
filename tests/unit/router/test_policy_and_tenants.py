"""Policies and tenants: validation messages name file and key; shipped files load; auth by key."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.common.config import ConfigError
from services.common.errors import PermissionDeniedError, UnauthenticatedError
from services.router.policy import Thresholds, load_policy_dir, load_policy_file
from services.router.tenants import hash_key, load_tenants

ROOT = Path(__file__).resolve().parents[3]


def test_shipped_policies_and_tenants_load() -> None:
    policies = load_policy_dir(ROOT / "config" / "policies")
    assert {"default", "strict"} <= set(policies)
    assert policies["strict"].custom_lexicon is not None
    directory = load_tenants(ROOT / "config" / "tenants.yaml", set(policies))
    assert directory.authenticate("demo-acme-key").id == "acme"


@pytest.mark.parametrize("body, key, problem", [
    ("name: p\nversion: '1'\ncategories: {hate: {review: 0.9, block: 0.5}}\n", "categories.hate", "must not be above block"),
    ("name: p\nversion: '1'\ncategories: {hate: {block: 1.5}}\n", "categories.hate", "between 0 and 1"),
    ("name: p\nversion: '1'\ncategories: {gore: {block: 0.5}}\n", "categories.gore", "not a taxonomy category"),
    ("name: p\nversion: '1'\nfailure: {vision: maybe}\n", "failure.vision", "must be one of ['open', 'closed']"),
    ("name: p\nversion: '1'\nblocklist: {custom: {brand: {terms: []}}}\n", "blocklist.custom.brand", "at least one term"),
    ("name: other\nversion: '1'\n", "name", "must equal the file name"),
    ("name: p\n", "version", "required key is missing"),
])
def test_invalid_policies_are_rejected_precisely(tmp_path: Path, body: str, key: str, problem: str) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(body)
    with pytest.raises(ConfigError) as caught:
        load_policy_file(path)
    assert str(caught.value).startswith(f"{path}: {key}")
    assert problem in str(caught.value)


def test_thresholds_pick_the_strongest_action() -> None:
    thresholds = Thresholds(review=0.5, block=0.8)
    assert thresholds.action_for(0.49) == ("allow", "")
    assert thresholds.action_for(0.5) == ("review", "review >= 0.5")
    assert thresholds.action_for(0.95) == ("block", "block >= 0.8")


def write_tenants(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "tenants.yaml"
    path.write_text(body)
    return path


def test_tenant_auth_and_policy_permissions(tmp_path: Path) -> None:
    path = write_tenants(tmp_path, f"tenants:\n  - id: a\n    api_key_sha256: {hash_key('ka')}\n    policies: [default]\n"
                                   f"  - id: b\n    api_key_sha256: {hash_key('kb')}\n    policies: [strict, default]\n")
    directory = load_tenants(path, {"default", "strict"})
    tenant_a = directory.authenticate("ka")
    assert directory.authenticate("kb").resolve_policy("") == "strict"
    assert tenant_a.resolve_policy("") == "default"
    with pytest.raises(PermissionDeniedError, match="'strict' is not enabled for this tenant"):
        tenant_a.resolve_policy("strict")
    with pytest.raises(UnauthenticatedError, match="missing API key"):
        directory.authenticate(None)
    with pytest.raises(UnauthenticatedError, match="unknown API key"):
        directory.authenticate("kc")


@pytest.mark.parametrize("body, key, problem", [
    ("tenants:\n  - id: a\n    api_key_sha256: abc\n    policies: [default]\n", "tenants[0]", "64-character hex"),
    (f"tenants:\n  - id: a\n    api_key_sha256: {hash_key('k')}\n    policies: [nope]\n", "tenants[0].policies", "unknown policy 'nope'"),
    (f"tenants:\n  - id: a\n    api_key_sha256: {hash_key('k')}\n    policies: [default]\n"
     f"  - id: b\n    api_key_sha256: {hash_key('k')}\n    policies: [default]\n", "tenants[1].api_key_sha256", "same key as tenant 'a'"),
])
def test_invalid_tenants_are_rejected_precisely(tmp_path: Path, body: str, key: str, problem: str) -> None:
    path = write_tenants(tmp_path, body)
    with pytest.raises(ConfigError) as caught:
        load_tenants(path, {"default"})
    assert str(caught.value).startswith(f"{path}: {key}")
    assert problem in str(caught.value)
