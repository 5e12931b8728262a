"""Putting, activating, rolling back and canarying policy versions through PolicyControl and the
runtime snapshot it swaps; file imports (a bad file rejected, the old version kept)."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.common.config import ConfigError
from services.common.errors import AlreadyExistsError, FailedPreconditionError, NotFoundError, PermissionDeniedError
from services.router.control.canary import RollbackBounds
from services.router.control.control import InvalidDocumentError, PolicyControl
from services.router.control.runtime import Snapshot
from services.router.control.store import SQLitePolicyStore
from services.router.tenants import Tenant
from tests.stubs import open_control, policy_yaml, tenants_yaml


def tenant(control: PolicyControl, tenant_id: str) -> Tenant:
    return control.runtime.snapshot.tenants.tenants[tenant_id]


def test_files_are_imported_and_served(tmp_path: Path) -> None:
    control, _ = open_control(tmp_path)
    snapshot = control.runtime.snapshot
    assert {name: p.version for name, p in snapshot.policies.items()} == {"default": "1", "strict": "1"}
    assert snapshot.select(tenant(control, "a"), "", "item").policy.version == "1"
    assert snapshot.policies["strict"].custom_lexicon is not None  # automaton built before the swap
    with pytest.raises(PermissionDeniedError):
        snapshot.select(tenant(control, "b"), "default", "item")


def test_activation_swaps_atomically_and_rollback_goes_back(tmp_path: Path) -> None:
    control, _ = open_control(tmp_path)
    a = tenant(control, "a")
    in_flight = control.runtime.snapshot.select(a, "", "item-1")  # a request that started before the swap
    stored = control.put("policy", policy_yaml("default", "2", hate_block=0.8), name="default", author="ops")
    assert control.runtime.snapshot.select(a, "", "item-1").policy.version == "1"  # put does not activate
    change = control.activate("policy", "default", stored.version, author="ops")
    assert (change.previous, change.version) == ("1", "2")
    assert control.runtime.snapshot.select(a, "", "item-1").policy.version == "2"
    assert in_flight.policy.version == "1"  # the running request keeps the version it started with
    assert control.rollback("policy", "default", author="ops").version == "1"
    assert control.runtime.snapshot.policies["default"].version == "1"


def test_tenant_pointer_overrides_the_global_one(tmp_path: Path) -> None:
    control, _ = open_control(tmp_path)
    control.put("policy", policy_yaml("strict", "2", hate_block=0.6), name="strict", author="ops")
    control.activate("policy", "strict", "2", "b", author="ops")
    snapshot = control.runtime.snapshot
    assert snapshot.select(tenant(control, "b"), "", "x").policy.version == "2"
    assert snapshot.select(tenant(control, "a"), "strict", "x").policy.version == "1"
    control.activate("policy", "strict", "", "b", author="ops")  # remove b's own pointer
    assert control.runtime.snapshot.select(tenant(control, "b"), "", "x").policy.version == "1"
    with pytest.raises(FailedPreconditionError, match="tenant 'b' is not given policy 'default'"):
        control.activate("policy", "default", "1", "b", author="ops")
    with pytest.raises(NotFoundError, match="no tenant 'zed'"):
        control.activate("policy", "default", "1", "zed", author="ops")


@pytest.mark.parametrize("text, message", [
    ("name: p\nversion: '2'\ncategories: {hate: {review: 0.9, block: 0.5}}\n",
     "policy/p: categories.hate: review (0.9) must not be above block (0.5)"),
    ("name: p\nversion: '2'\ncategories: {hate: {block: 1.5}}\n", "policy/p: categories.hate: block must be between 0 and 1, got 1.5"),
    ("name: p\nversion: '2'\nfailure: {vision: maybe}\n", "policy/p: failure.vision: must be one of ['open', 'closed'], got 'maybe'"),
    ("name: p\nversion: '2'\nblocklist: {custom: {brand: {terms: []}}}\n", "policy/p: blocklist.custom.brand: terms must list at least one term"),
    ("name: p\nversion: '2'\nthreshold: 3\n", "policy/p: threshold: unknown key"),
    ("name: p\nversion: 'two words'\n", "policy/p: version: must be 1-64 letters"),
    ("name: other\nversion: '2'\n", "policy/p: name: must equal 'p', got 'other'"),
    ("name: p\nversion: '2'\ncategories: [\n", "policy/p: line 4: invalid YAML"),
])
def test_invalid_policies_are_rejected_with_path_and_key(tmp_path: Path, text: str, message: str) -> None:
    control, _ = open_control(tmp_path)
    with pytest.raises(InvalidDocumentError) as caught:
        control.put("policy", text, name="p", author="ops")
    assert str(caught.value).startswith(message), str(caught.value)


def test_version_ids_are_immutable(tmp_path: Path) -> None:
    control, _ = open_control(tmp_path)
    same = control.put("policy", policy_yaml("default", "1"), name="default", author="someone else")
    assert same.author.startswith("file:")  # identical content: the stored version, unchanged
    with pytest.raises(AlreadyExistsError, match="version: '1' already exists with different content"):
        control.put("policy", policy_yaml("default", "1", hate_block=0.7), name="default", author="ops")


def test_tenants_versions_are_checked_before_activation(tmp_path: Path) -> None:
    control, _ = open_control(tmp_path)
    bad = control.put("tenants", tenants_yaml([("a", "key-a", ["nope"])]), author="ops")
    assert bad.version.startswith("sha-")
    with pytest.raises(FailedPreconditionError, match=r"tenants\[0\]\.policies: unknown policy 'nope'"):
        control.activate("tenants", "tenants", bad.version, author="ops")
    qos = control.put("tenants", "qos_classes: [{name: gold, dscp: 46, link_share_percent: 100}]\n"
                                 "tenants: []\nversion: q1\n", author="ops")
    with pytest.raises(FailedPreconditionError, match="qos_classes: differ from the running router's"):
        control.activate("tenants", "tenants", qos.version, author="ops")
    good = control.put("tenants", tenants_yaml([("c", "key-c", ["default"])], version="t2"), author="ops")
    control.activate("tenants", "tenants", good.version, author="ops")
    directory = control.runtime.snapshot.tenants
    assert directory.authenticate("key-c").id == "c" and control.runtime.snapshot.tenants_version == "t2"


def test_canary_splits_traffic_by_item_id(tmp_path: Path) -> None:
    control, _ = open_control(tmp_path)
    control.put("policy", policy_yaml("default", "2"), name="default", author="ops")
    control.start_canary("default", "", "2", 20.0, shadow=False, bounds=None, author="ops")
    snapshot, a = control.runtime.snapshot, tenant(control, "a")
    versions = [snapshot.select(a, "", f"item-{i}").policy.version for i in range(5000)]
    assert abs(versions.count("2") / 5000 - 0.20) < 0.02
    assert snapshot.select(a, "", "item-7").policy.version == snapshot.select(a, "", "item-7").policy.version
    stopped = control.stop_canary("default", "", promote=True, author="ops")
    assert not stopped.running and stopped.stopped_reason == "promoted by ops"
    assert control.runtime.snapshot.policies["default"].version == "2" and not control.runtime.snapshot.canaries


def test_shadow_canary_answers_with_the_baseline(tmp_path: Path) -> None:
    control, _ = open_control(tmp_path)
    control.put("policy", policy_yaml("default", "2"), name="default", author="ops")
    control.start_canary("default", "", "2", 50.0, shadow=True, bounds=None, author="ops")
    selections = [control.runtime.snapshot.select(tenant(control, "a"), "", f"i{i}") for i in range(1000)]
    assert {s.policy.version for s in selections} == {"1"}
    shadowed = [s for s in selections if s.shadow is not None]
    assert 400 < len(shadowed) < 600 and {s.shadow.version for s in shadowed if s.shadow} == {"2"}


def test_auto_rollback_when_the_candidate_blocks_too_much(tmp_path: Path) -> None:
    control, _ = open_control(tmp_path, RollbackBounds(max_block_rate_delta=0.2, min_samples=20))
    control.put("policy", policy_yaml("default", "2", hate_block=0.5), name="default", author="ops")
    control.start_canary("default", "", "2", 50.0, shadow=False, bounds=None, author="ops")
    runtime, a = control.runtime, tenant(control, "a")
    reason = None
    for i in range(200):
        selection = runtime.snapshot.select(a, "", f"i{i}")
        decision = "block" if selection.arm == "candidate" else "allow"
        reason = runtime.observe(selection, f"i{i}", decision=decision, actions={"hate": decision}) or reason
        if reason:
            break
    assert reason is not None and reason.startswith("candidate block rate 1.00 vs baseline 0.00")
    assert not runtime.snapshot.canaries  # traffic is back on the baseline at once
    assert runtime.snapshot.select(a, "", "i1").policy.version == "1"
    control.stop_canary("default", "", author="auto-rollback", reason=f"auto-rollback: {reason}")
    control.reload(force=True)
    assert not control.runtime.snapshot.canaries  # and stays there
    assert control.canary_spec("default", "").stopped_reason.startswith("auto-rollback: candidate block rate")


def test_bad_config_file_is_rejected_naming_file_and_key(tmp_path: Path) -> None:
    control, files = open_control(tmp_path)
    path = files.write_policy("default", "name: default\nversion: '2'\ncategories: {hate: {review: 2}}\n")
    with pytest.raises(ConfigError) as caught:
        control.import_file("policy", path)
    assert str(caught.value).startswith(f"{path}: categories.hate: review must be between 0 and 1")
    assert control.runtime.snapshot.policies["default"].version == "1"
    files.write_policy("default", policy_yaml("default", "1", hate_block=0.5))  # edited without a new version
    with pytest.raises(ConfigError, match=f"{path}: version: '1' is already stored with different content"):
        control.import_file("policy", path)
    files.write_policy("default", policy_yaml("default", "3", hate_block=0.5))
    assert control.import_file("policy", path) is not None
    assert control.runtime.snapshot.policies["default"].version == "3"


def test_restart_keeps_api_activations_of_unchanged_files(tmp_path: Path) -> None:
    control, files = open_control(tmp_path)
    control.put("policy", policy_yaml("default", "2"), name="default", author="ops")
    control.activate("policy", "default", "2", author="ops")
    control.store.close()
    restarted = PolicyControl(SQLitePolicyStore(tmp_path / "store.sqlite"))
    snapshot = restarted.import_files(files.policies_dir, files.tenants_file)
    assert snapshot.policies["default"].version == "2"  # the files did not change: the store's pointer holds


def test_swap_listeners_get_old_and_new_and_a_failing_one_does_not_stop_the_swap(tmp_path: Path) -> None:
    control, _ = open_control(tmp_path)
    seen: list[tuple[int, int]] = []

    def broken(old: Snapshot, new: Snapshot) -> None:
        raise RuntimeError("listener bug")

    control.runtime.on_swap(broken)
    control.runtime.on_swap(lambda old, new: seen.append((old.generation, new.generation)))
    before = control.runtime.snapshot
    after = control.reload(force=True)
    assert control.runtime.snapshot is after
    assert seen == [(before.generation, after.generation)]


def test_a_replica_restarting_with_an_older_file_does_not_take_the_fleet_back(tmp_path: Path) -> None:
    control, files = open_control(tmp_path)  # default@1 imported from the file
    path = files.write_policy("default", policy_yaml("default", "2", hate_block=0.5))
    control.import_file("policy", path)  # the new rollout's file
    assert control.runtime.snapshot.policies["default"].version == "2"
    files.write_policy("default", policy_yaml("default", "1"))  # a pod of the old rollout, same path, old file
    restarted = PolicyControl(SQLitePolicyStore(tmp_path / "store.sqlite"))
    assert restarted.import_files(files.policies_dir, files.tenants_file).policies["default"].version == "2"
    # A change a running router's watcher sees is an operator's: the file wins, even an older version.
    assert restarted.import_file("policy", path) is not None
    assert restarted.runtime.snapshot.policies["default"].version == "1"
