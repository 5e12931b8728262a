"""Issue 12 item 5 (last part): the compose file served the demo keys on 0.0.0.0. A router configured
with a shipped demo key now refuses to start on a non-loopback address, with a clear error, unless
`allow_demo_keys` (or AUDITMESH_ALLOW_DEMO_KEYS=1) says it is a demo on purpose."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from services.common.config import ConfigError
from services.launcher import ROOT, free_base_port
from services.router.demo_keys import check_demo_keys, is_loopback
from services.router.tenants import hash_key


def test_loopback_addresses() -> None:
    assert is_loopback("127.0.0.1:8100") and is_loopback("[::1]:8100") and is_loopback("localhost:1")
    assert not is_loopback("0.0.0.0:8100") and not is_loopback("[::]:8100") and not is_loopback("router:8100")


def test_demo_keys_on_a_public_address_are_refused_unless_allowed() -> None:
    digests = [hash_key("demo-acme-key"), hash_key("a-real-key")]
    with pytest.raises(ConfigError, match="demo-acme-key.*0.0.0.0:8100"):
        check_demo_keys(["0.0.0.0:8100"], digests, allow=False, source="config/router.yaml")
    check_demo_keys(["127.0.0.1:8100"], digests, allow=False, source="config/router.yaml")
    check_demo_keys(["0.0.0.0:8100"], digests, allow=True, source="config/router.yaml")
    check_demo_keys(["0.0.0.0:8100"], [hash_key("a-real-key")], allow=False, source="config/router.yaml")


def run_router(tmp_path: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AUDITMESH_")}
    env.update({"AUDITMESH_LISTEN": f"0.0.0.0:{free_base_port(1)}", "AUDITMESH_METRICS_LISTEN": "off",
                "AUDITMESH_ADMIN_LISTEN": "off", "AUDITMESH_POLICY_STORE": str(tmp_path / "store.sqlite"),
                "AUDITMESH_AUDIT_LOG": str(tmp_path / "audit.sqlite"), **extra})
    try:
        return subprocess.run([sys.executable, "-m", "services.router", "--config", "config/router.yaml"], cwd=ROOT,
                              env=env, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("the router served the demo keys on 0.0.0.0")


def test_the_router_refuses_to_start_with_demo_keys_on_all_interfaces(tmp_path: Path) -> None:
    done = run_router(tmp_path)
    assert done.returncode == 2
    assert "demo key" in done.stderr and "allow_demo_keys" in done.stderr and "0.0.0.0" in done.stderr
