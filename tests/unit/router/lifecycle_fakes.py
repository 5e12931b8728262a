"""Shared fakes for the policy lifecycle tests: documents, a control over a temporary store (and the
fake clock of tests/stubs.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from services.router.control.canary import RollbackBounds
from services.router.control.control import PolicyControl
from services.router.control.store import SQLitePolicyStore
from services.router.tenants import hash_key
from tests.stubs import FakeClock as FakeClock  # re-exported; the clock lives with the shared fakes


def policy_yaml(name: str, version: str, *, hate_block: float = 0.9, terms: Sequence[str] = (),
                include_content: bool = False, use_default: bool = True) -> str:
    """A small valid policy document."""
    custom = f"custom: {{watch: {{severity: high, terms: {list(terms)!r}}}}}" if terms else "custom: {}"
    return (f"name: {name}\nversion: '{version}'\ncategories:\n  hate: {{review: 0.5, block: {hate_block}}}\n"
            f"blocklist:\n  use_default_lexicon: {str(use_default).lower()}\n  {custom}\n"
            f"audit: {{include_content: {str(include_content).lower()}}}\n")


def tenants_yaml(tenants: Sequence[tuple[str, str, Sequence[str]]], version: str = "") -> str:
    """A tenants document: (id, API key, policies) per tenant."""
    lines = [f"version: '{version}'"] if version else []
    lines.append("tenants:")
    for tenant_id, key, policies in tenants:
        lines.append(f"  - {{id: {tenant_id}, api_key_sha256: {hash_key(key)}, policies: {list(policies)!r}}}")
    return "\n".join(lines) + "\n"


@dataclass
class ConfigFiles:
    policies_dir: Path
    tenants_file: Path

    def write_policy(self, name: str, text: str) -> Path:
        path = self.policies_dir / f"{name}.yaml"
        path.write_text(text)
        return path


def config_files(tmp_path: Path) -> ConfigFiles:
    """policies default@1 and strict@1; tenants a (default, strict) and b (strict)."""
    files = ConfigFiles(tmp_path / "policies", tmp_path / "tenants.yaml")
    files.policies_dir.mkdir()
    files.write_policy("default", policy_yaml("default", "1"))
    files.write_policy("strict", policy_yaml("strict", "1", hate_block=0.75, terms=["megacorp sucks"]))
    files.tenants_file.write_text(tenants_yaml([("a", "key-a", ["default", "strict"]), ("b", "key-b", ["strict"])]))
    return files


def open_control(tmp_path: Path, bounds: RollbackBounds = RollbackBounds()) -> tuple[PolicyControl, ConfigFiles]:
    """A PolicyControl over a fresh store, with `config_files` imported."""
    files = config_files(tmp_path)
    control = PolicyControl(SQLitePolicyStore(tmp_path / "store.sqlite"), default_bounds=bounds)
    control.import_files(files.policies_dir, files.tenants_file)
    return control, files
