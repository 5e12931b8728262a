"""services/router/policy.py: policy files load the way the router imports them, validation messages
name file and key, thresholds pick the strongest action."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.common.config import ConfigError
from services.router.policy import Thresholds
from tests.stubs import import_config, policy_from_file

ROOT = Path(__file__).resolve().parents[3]


def test_shipped_policies_load(tmp_path: Path) -> None:
    policies = import_config(tmp_path / "store.sqlite", ROOT / "config" / "policies", ROOT / "config" / "tenants.yaml").policies
    assert {"default", "strict"} <= set(policies)
    assert policies["strict"].custom_lexicon is not None
    assert policies["default"].content_hash == policy_from_file(ROOT / "config" / "policies" / "default.yaml").content_hash


@pytest.mark.parametrize("body, key, problem", [
    ("name: p\nversion: '1'\ncategories: {hate: {review: 0.9, block: 0.5}}\n", "categories.hate", "must not be above block"),
    ("name: p\nversion: '1'\ncategories: {hate: {block: 1.5}}\n", "categories.hate", "between 0 and 1"),
    ("name: p\nversion: '1'\ncategories: {gore: {block: 0.5}}\n", "categories.gore", "not a taxonomy category"),
    ("name: p\nversion: '1'\nfailure: {vision: maybe}\n", "failure.vision", "must be one of ['open', 'closed']"),
    ("name: p\nversion: '1'\ncategories: {custom.Crypto-Scam: {block: 0.5}}\n", "categories.custom.Crypto-Scam",
     "custom.<name> (lower-case"),
    ("name: p\nversion: '1'\ntenant_classifier: {mode: overwrite}\n", "tenant_classifier.mode",
     "must be one of ['add', 'replace']"),
    ("name: p\nversion: '1'\nfailure: {classifier: maybe}\n", "failure.classifier", "must be one of ['open', 'closed']"),
    ("name: p\nversion: '1'\nblocklist: {custom: {brand: {terms: []}}}\n", "blocklist.custom.brand", "at least one term"),
    ("name: other\nversion: '1'\n", "name", "must equal 'p', got 'other'"),  # the file name is the policy's
    ("name: p\n", "version", "required key is missing"),
])
def test_invalid_policies_are_rejected_precisely(tmp_path: Path, body: str, key: str, problem: str) -> None:
    policies = tmp_path / "policies"
    policies.mkdir()
    path = policies / "p.yaml"
    path.write_text(body)
    with pytest.raises(ConfigError) as caught:
        import_config(tmp_path / "store.sqlite", policies, ROOT / "config" / "tenants.yaml")
    assert str(caught.value).startswith(f"{path}: {key}")
    assert problem in str(caught.value)


def test_thresholds_pick_the_strongest_action() -> None:
    thresholds = Thresholds(review=0.5, block=0.8)
    assert thresholds.action_for(0.49) == ("allow", "")
    assert thresholds.action_for(0.5) == ("review", "review >= 0.5")
    assert thresholds.action_for(0.95) == ("block", "block >= 0.8")
