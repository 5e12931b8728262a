"""services/router/tenants.py: tenants files load the way the router imports them (against the
policies it has), validation messages name file and key, authentication by key and policy permissions."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.common.config import ConfigError
from services.common.errors import PermissionDeniedError, UnauthenticatedError
from services.router.tenants import TenantDirectory, hash_key
from tests.stubs import config_files, import_config

ROOT = Path(__file__).resolve().parents[3]


def imported_tenants(tmp_path: Path, body: str) -> TenantDirectory:
    """`body` as the tenants file next to policies default and strict, imported as at router start."""
    files = config_files(tmp_path)
    files.tenants_file.write_text(body)
    return import_config(tmp_path / "store.sqlite", files.policies_dir, files.tenants_file).tenants


def test_shipped_tenants_load(tmp_path: Path) -> None:
    directory = import_config(tmp_path / "store.sqlite", ROOT / "config" / "policies", ROOT / "config" / "tenants.yaml").tenants
    assert directory.authenticate("demo-acme-key").id == "acme"


def test_tenant_auth_and_policy_permissions(tmp_path: Path) -> None:
    directory = imported_tenants(tmp_path, f"tenants:\n  - id: a\n    api_key_sha256: {hash_key('ka')}\n    policies: [default]\n"
                                       f"  - id: b\n    api_key_sha256: {hash_key('kb')}\n    policies: [strict, default]\n")
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
    with pytest.raises(ConfigError) as caught:
        imported_tenants(tmp_path, body)
    assert str(caught.value).startswith(f"{tmp_path / 'tenants.yaml'}: {key}")
    assert problem in str(caught.value)
