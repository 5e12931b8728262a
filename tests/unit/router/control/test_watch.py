"""The config watcher: a changed file is imported and activated; a bad one is rejected with an error
naming the file and the key, and the old version keeps serving."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from services.router.control.watch import ConfigWatcher
from services.router.control.control import PolicyControl
from services.router.control.store import SQLitePolicyStore
from tests.stubs import open_control, policy_yaml, tenants_yaml


def touch_later(path: Path) -> None:
    """Make sure the change is visible to a (size, mtime) check even on a coarse clock."""
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))


def test_changes_are_imported_and_bad_files_rejected(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    control, files = open_control(tmp_path)
    watcher = ConfigWatcher(control, files.policies_dir, files.tenants_file)
    assert watcher.poll() == []

    path = files.write_policy("default", policy_yaml("default", "2", hate_block=0.7))
    touch_later(path)
    assert watcher.poll() == [f"imported {path} as policy default@2"]
    assert control.runtime.snapshot.policies["default"].version == "2"

    path.write_text("name: default\nversion: '3'\ncategories: {hate: {review: 0.9, block: 0.5}}\n")
    touch_later(path)
    with caplog.at_level(logging.ERROR):
        events = watcher.poll()
    assert events == [f"rejected {path}: {path}: categories.hate: review (0.9) must not be above block (0.5)"]
    assert f"{path}: categories.hate: review (0.9) must not be above block (0.5)" in caplog.text
    assert control.runtime.snapshot.policies["default"].version == "2"  # the old version kept
    assert watcher.poll() == []  # not retried until the file changes again


def test_tenants_file_and_new_policy_in_one_update(tmp_path: Path) -> None:
    control, files = open_control(tmp_path)
    watcher = ConfigWatcher(control, files.policies_dir, files.tenants_file)
    files.write_policy("kids", policy_yaml("kids", "1", hate_block=0.5))
    files.tenants_file.write_text(tenants_yaml([("a", "key-a", ["default"]), ("k", "key-k", ["kids"])]))
    touch_later(files.tenants_file)
    events = watcher.poll()
    assert events[0].startswith("imported") and "policy kids@1" in events[0]  # policies first
    assert events[1].startswith(f"imported {files.tenants_file} as tenants tenants@sha-")
    assert control.runtime.snapshot.tenants.authenticate("key-k").id == "k"


def test_tenants_file_naming_an_unknown_policy_is_rejected(tmp_path: Path) -> None:
    control, files = open_control(tmp_path)
    watcher = ConfigWatcher(control, files.policies_dir, files.tenants_file)
    files.tenants_file.write_text(tenants_yaml([("a", "key-a", ["missing"])]))
    touch_later(files.tenants_file)
    [event] = watcher.poll()
    assert event.endswith(f"{files.tenants_file}: tenants[0].policies: unknown policy 'missing'; "
                          f"known: ['default', 'strict']")
    assert control.runtime.snapshot.tenants.authenticate("key-b").id == "b"


def test_another_replica_activation_is_picked_up(tmp_path: Path) -> None:
    control, files = open_control(tmp_path)
    replica = PolicyControl(SQLitePolicyStore(tmp_path / "store.sqlite"))  # another router on the same store
    replica.reload()
    replica.put("policy", policy_yaml("default", "9"), name="default", author="ops")
    replica.activate("policy", "default", "9", author="ops")
    assert control.runtime.snapshot.policies["default"].version == "1"
    ConfigWatcher(control, files.policies_dir, files.tenants_file).poll()  # each poll checks the generation
    assert control.runtime.snapshot.policies["default"].version == "9"
