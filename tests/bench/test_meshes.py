"""The files the benchmark writes for the mesh stay valid for the services that read them."""

from __future__ import annotations

from pathlib import Path

from bench.meshes import unbatched_config_dir
from bench.scenarios import TENANTS
from bench.tenants import tenants_yaml
from services.common.serving.modality_config import load_service_config
from services.launcher import MODALITIES, ROOT, free_base_port
from tests.stubs import import_config

POLICIES = ROOT / "config" / "policies"


def test_unbatched_configs_load_with_batching_off(tmp_path: Path) -> None:
    directory = unbatched_config_dir(tmp_path)
    for modality in MODALITIES:
        config = load_service_config(directory / f"{modality}.yaml")
        shipped = load_service_config(ROOT / "config" / f"{modality}.yaml")
        assert config.batching.max_batch_size == 1 and config.batching.max_concurrency == 1
        assert config.onnxruntime == shipped.onnxruntime  # same models, same threads


def test_bench_tenants_load_with_their_classes(tmp_path: Path) -> None:
    path = tmp_path / "tenants.yaml"
    path.write_text(tenants_yaml(TENANTS), encoding="utf-8")
    directory = import_config(tmp_path / "store.sqlite", POLICIES, path).tenants
    assert {t.id: t.qos_class for t in directory.tenants.values()} == {t.id: t.qos_class for t in TENANTS}
    assert directory.authenticate(TENANTS[0].key).id == TENANTS[0].id


def test_free_base_port_leaves_room_for_four_services() -> None:
    assert 0 < free_base_port() < 65535 - 4


def test_profile_policies_load_with_the_profile_and_a_distinct_version(tmp_path: Path) -> None:
    from bench.meshes import profile_policies_dir

    tenants = ROOT / "config" / "tenants.yaml"
    shipped = import_config(tmp_path / "shipped.sqlite", POLICIES, tenants).policies
    policies = import_config(tmp_path / "fast.sqlite", profile_policies_dir(tmp_path, "fast"), tenants).policies
    assert set(policies) == set(shipped)
    for name, policy in policies.items():
        assert policy.profile == "fast" and policy.version == f"{shipped[name].version}+fast"
        assert policy.document.categories == shipped[name].document.categories
