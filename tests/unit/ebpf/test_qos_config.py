from __future__ import annotations

from pathlib import Path

import pytest

from ebpf.qos_config import load_plan, load_qos_config
from services.common.config import ConfigError

ROOT = Path(__file__).resolve().parents[3]
DIGEST = "a" * 64


def test_repository_tenants_file_gives_the_documented_plan() -> None:
    config = load_qos_config(ROOT / "config" / "tenants.yaml")
    assert [c.name for c in config.classes] == ["realtime", "standard", "bulk"]
    assert config.tenant_classes == {"acme": "realtime", "globex": "bulk"}
    plan = load_plan(ROOT / "config" / "tenants.yaml", 10**9, tenant_ports={"acme": 9000})
    assert plan.port_slots() == {9000: 1}
    assert [c.rate_bps for c in plan.classes] == [600_000_000, 300_000_000, 100_000_000]


def test_unknown_qos_class_of_a_tenant_names_the_key(tmp_path: Path) -> None:
    path = tmp_path / "tenants.yaml"
    path.write_text(f"tenants:\n  - id: a\n    api_key_sha256: {DIGEST}\n    policies: [default]\n    qos_class: gold\n")
    with pytest.raises(ConfigError, match=r"tenants\[0\]\.qos_class: unknown QoS class 'gold'"):
        load_qos_config(path)


def test_shares_over_100_are_rejected(tmp_path: Path) -> None:
    path = tmp_path / "tenants.yaml"
    path.write_text("qos_classes:\n  - {name: a, dscp: 1, link_share_percent: 70}\n"
                    "  - {name: b, dscp: 2, link_share_percent: 40}\ntenants: []\n")
    with pytest.raises(ConfigError, match="over 100"):
        load_qos_config(path)
