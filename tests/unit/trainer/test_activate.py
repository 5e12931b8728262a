"""services/trainer/activate.py's pure part: the policy version that reads a tenant classifier, and the
CLI's refusals before any call (the gRPC steps run against a real mesh in
tests/integration/test_tenant_classifier_service.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from services.cli import main
from services.router.control.versions import compile_policy_text
from services.trainer.activate import Activation, candidate_version, policy_reading

ROOT = Path(__file__).resolve().parents[3]


def test_the_new_version_reads_the_classifier_and_reviews_new_custom_categories_at_its_threshold() -> None:
    shipped = yaml.safe_load((ROOT / "config" / "policies" / "default.yaml").read_text(encoding="utf-8"))
    shipped["categories"]["custom.kept"] = {"block": 0.7}
    document = policy_reading(shipped, tenant="acme", classifier_version="9f2e1b7d0c4a", mode="replace",
                              thresholds={"custom.crypto_scam": 0.41234, "custom.kept": 0.2, "spam": 0.3})
    assert document["version"] == f"acme:{shipped['version']}+clf-9f2e1b7d0c4a"
    assert document["tenant_classifier"] == {"version": "9f2e1b7d0c4a", "mode": "replace"}
    assert document["categories"]["custom.crypto_scam"] == {"review": 0.4123}
    assert document["categories"]["custom.kept"] == {"block": 0.7}  # the policy's own thresholds stay
    assert document["categories"]["spam"] == shipped["categories"]["spam"]  # built-in: the policy's
    assert "tenant_classifier" not in shipped  # a copy
    compiled = compile_policy_text(document, "derived")  # what the router will accept
    assert compiled.document.tenant_classifier is not None and compiled.document.tenant_classifier.mode == "replace"


def test_versions_are_the_tenants_own_derived_from_the_base_and_fit_64_characters() -> None:
    assert candidate_version("acme:v1+clf-aaaaaaaaaaaa", "acme", "bbbbbbbbbbbb") == "acme:v1+clf-bbbbbbbbbbbb"
    assert candidate_version("v1", "globex", "bbbbbbbbbbbb") == "globex:v1+clf-bbbbbbbbbbbb"
    long = candidate_version("x" * 64, "acme", "bbbbbbbbbbbb")
    assert len(long) == 64 and long.startswith("acme:xxx") and long.endswith("+clf-bbbbbbbbbbbb")


def test_a_canary_share_outside_0_100_is_refused() -> None:
    with pytest.raises(ValueError, match="percent"):
        Activation("default", "canary", percent=0.0)
    Activation("default", "shadow", percent=0.0)  # not a canary: the share is unused


def test_the_cli_refuses_without_an_admin_key_or_the_secrets(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("AUDITMESH_ADMIN_KEY", "AUDITMESH_INTERNAL_SECRET", "AUDITMESH_INTERNAL_ADMIN_SECRET"):
        monkeypatch.delenv(variable, raising=False)
    base = ["classifier", "activate", "--classifier", str(tmp_path), "--policy", "default", "--shadow"]
    assert main(base) == 2
    assert "give --admin-key or set AUDITMESH_ADMIN_KEY" in capsys.readouterr().err
    assert main([*base, "--admin-key", "k", "--internal-secret-file", str(tmp_path / "missing")]) == 2
    assert f"cannot read {tmp_path / 'missing'}" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # one stage, not two
        main([*base, "--full", "--admin-key", "k"])


def test_max_disagreement_only_bounds_a_shadow_canary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["classifier", "activate", "--classifier", str(tmp_path), "--policy", "default", "--full",
                 "--admin-key", "k", "--max-disagreement", "0.2"]) == 2
    assert "--max-disagreement bounds a shadow canary" in capsys.readouterr().err
