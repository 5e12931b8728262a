"""The SQLite policy store: immutable versions, compare-and-set pointers with a log, canaries, the
generation counter, persistence across reopening."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from services.common.errors import AlreadyExistsError, ConflictError
from services.router.control.canary import RollbackBounds
from services.router.control.store import CanarySpec, SQLitePolicyStore, StoredVersion
from tests.stubs import FakeClock


def version(v: str, digest: str = "h1") -> StoredVersion:
    return StoredVersion("policy", "default", v, f"name: default\nversion: '{v}'\n", digest, "ops", "why", 1.0)


def test_versions_are_immutable_and_puts_are_idempotent(tmp_path: Path) -> None:
    store = SQLitePolicyStore(tmp_path / "s.sqlite")
    assert store.put_version(version("1")) == version("1")
    assert store.put_version(version("1")) == version("1")  # same content: a no-op
    with pytest.raises(AlreadyExistsError, match=r"policy/default: version: '1' already exists with different content"):
        store.put_version(version("1", digest="h2"))
    store.put_version(version("2", digest="h2"))
    assert [v.version for v in store.list_versions("policy", "default")] == ["1", "2"]
    assert store.get_version("policy", "default", "3") is None


def test_pointers_compare_and_set_and_log_every_change(tmp_path: Path) -> None:
    store = SQLitePolicyStore(tmp_path / "s.sqlite", clock=FakeClock())
    start = store.generation()
    store.set_pointer("policy", "default", "", "1", expected="", author="ops", reason="first")
    store.set_pointer("policy", "default", "", "2", expected="1", author="ops", reason="raise")
    with pytest.raises(ConflictError, match="points at '2', not '1'"):
        store.set_pointer("policy", "default", "", "3", expected="1", author="other", reason="stale")
    store.set_pointer("policy", "default", "acme", "1", expected="", author="ops", reason="pin acme")
    store.set_pointer("policy", "default", "acme", "", expected="1", author="ops", reason="unpin")
    assert [(p.scope, p.version) for p in store.pointers()] == [("", "2")]
    assert [(c.version, c.previous) for c in store.history("policy", "default", "")] == [("1", ""), ("2", "1")]
    assert store.generation() == start + 4  # the failed compare-and-set changed nothing


def test_state_survives_reopening_the_file(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    store = SQLitePolicyStore(path)
    store.put_version(version("1"))
    store.set_pointer("policy", "default", "", "1", expected="", author="ops", reason="r")
    spec = CanarySpec("default", "", "1", "2", 10.0, True, RollbackBounds(min_samples=5), "ops", 5.0)
    store.put_canary(spec)
    store.set_file_hash("config/policies/default.yaml", "abc")
    store.close()
    reopened = SQLitePolicyStore(path)
    assert reopened.get_version("policy", "default", "1") == version("1")
    assert [p.version for p in reopened.pointers()] == ["1"]
    assert reopened.canaries() == [spec]
    assert reopened.file_hash("config/policies/default.yaml") == "abc" and reopened.file_hash("other") == ""


def test_canary_percent_is_validated() -> None:
    with pytest.raises(ValueError, match=r"percent must be in \(0, 100\], got 0"):
        CanarySpec("default", "", "1", "2", 0.0, False, RollbackBounds(), "ops", 1.0)


def test_a_canary_is_stopped_once_and_only_the_one_that_was_started(tmp_path: Path) -> None:
    store = SQLitePolicyStore(tmp_path / "s.sqlite")
    first = CanarySpec("default", "", "1", "2", 10.0, False, RollbackBounds(), "ops", 5.0)
    store.put_canary(first)
    stopped = dataclasses.replace(first, running=False, stopped_reason="auto-rollback")
    assert store.stop_canary(stopped) is True
    assert store.stop_canary(stopped) is False  # a second replica's late rollback writes nothing
    second = dataclasses.replace(first, candidate="3", started_at=9.0)
    store.put_canary(second)
    assert store.stop_canary(stopped) is False  # a rollback of the old canary never stops the new one
    assert store.canaries() == [second]
