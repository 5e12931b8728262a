"""Taxonomy-1 policies keep loading (services/router/policy_migration.py); the new policy keys are validated
with errors naming the file and the key."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from services.common.config import ConfigError
from services.router.control.versions import parse_document
from services.router.policy import BalancedRouting, Thresholds
from services.router.policy_migration import migrate_categories
from tests.stubs import import_config, policy_from_file

ROOT = Path(__file__).resolve().parents[3]
OLD_FILE = ROOT / "tests" / "fixtures" / "policy_taxonomy1.yaml"


def test_old_hate_threshold_covers_harassment_and_hate_with_a_log_line(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="services.router.policy"):
        policy = policy_from_file(OLD_FILE)
    categories = policy.document.categories
    assert categories["harassment"] == categories["hate"] == Thresholds(review=0.5, block=0.9)
    assert "policy_taxonomy1@2026-11-29.1: taxonomy 1 migration: categories.hate thresholds also applied to harassment" \
        in caplog.text
    assert policy.profile == "balanced" and policy.document.balanced == BalancedRouting()


def test_old_file_keeps_its_other_categories_and_adds_none() -> None:
    categories = policy_from_file(OLD_FILE).document.categories
    assert sorted(categories) == ["harassment", "hate", "sexual", "spam", "violence"]


def test_file_with_a_harassment_entry_is_not_migrated(caplog: pytest.LogCaptureFixture, tmp_path: Path) -> None:
    with caplog.at_level(logging.INFO, logger="services.router.policy"):
        policies = import_config(tmp_path / "store.sqlite", ROOT / "config" / "policies",
                                 ROOT / "config" / "tenants.yaml").policies
    assert "migration" not in caplog.text
    assert policies["default"].document.categories["harassment"] == Thresholds(review=0.5, block=0.85)


def test_an_empty_harassment_entry_switches_harassment_off() -> None:
    migrated, notes = migrate_categories({"hate": Thresholds(0.5, 0.9), "harassment": Thresholds()})
    assert not notes and not migrated["harassment"].acts


def test_nothing_to_migrate_without_hate() -> None:
    assert migrate_categories({"spam": 1}) == ({"spam": 1}, [])


def test_stored_version_hash_and_diff_use_the_document_as_written() -> None:
    text = OLD_FILE.read_text(encoding="utf-8")
    parsed = parse_document("policy", text, "policy/policy_taxonomy1")
    assert "harassment" not in parsed.canonical["categories"]
    assert parsed.compiled is not None and "harassment" in parsed.compiled.document.categories


@pytest.mark.parametrize("body, message", [
    ("profile: quick\n", "policy/p: profile: must be one of ['fast', 'balanced', 'accurate'], got 'quick'"),
    ("balanced: {low: 0.9, high: 0.1}\n", "policy/p: balanced: low (0.9) must not be above high (0.1)"),
    ("balanced: {low: -1}\n", "policy/p: balanced: low must be between 0 and 1, got -1"),
    ("balanced: {band: 1}\n", "policy/p: balanced.band: unknown key"),
    ("categories: {profanity: {review: 0.5, block: 0.9, max_action: review}}\n",
     "policy/p: categories.profanity: block (0.9) is set but max_action is 'review'"),
    ("categories: {profanity: {max_action: warn}}\n",
     "policy/p: categories.profanity.max_action: must be one of ['allow', 'review', 'block'], got 'warn'"),
    ("categories: {toxicity: {review: 0.5}}\n", "policy/p: categories.toxicity: not a taxonomy category"),
])
def test_new_keys_are_validated_naming_the_key(body: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_document("policy", f"name: p\nversion: '1'\n{body}", "policy/p")
    assert str(caught.value).startswith(message)


def test_file_errors_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("name: p\nversion: '1'\nprofile: turbo\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=f"^{path}: profile: must be one of"):
        policy_from_file(path)
