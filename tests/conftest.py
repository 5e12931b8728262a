"""The one real mesh of a test process, shared by the integration and security suites.

Starting the five service processes (text, vision, OCR, a router per lane) costs tens of seconds and
loads every model; both suites test the same shipped configuration, so they share one mesh started on
first use and stopped at the end of the run (with pytest-xdist workers, `make test TEST_WORKERS=4`: one mesh
per worker that runs such a test). Its tenants file holds both suites' tenants (disjoint ids
and keys). Tests that need a differently configured mesh (a dead upstream, a side router, a fresh one
to measure shedding) start their own.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

import pytest

from services.launcher import Mesh
from services.router.tenants import hash_key

from tests.mesh_fixtures import shipped_mesh
from tests.security.inputs import KEY as SECURITY_KEY
from tests.stubs import KEY_A, KEY_B, KEY_CHAT, KEY_FLOOD, KEY_LIMITED


def tenants_yaml() -> str:
    """Both suites' tenants: the integration ones (two policies' tenants, realtime chat, a bulk flood
    that degrades images, a quota-limited one) and the security suite's standard-class `sec`."""
    return (f"tenants:\n"
            f"  - id: tenant-a\n    api_key_sha256: {hash_key(KEY_A)}\n    policies: [default, strict]\n"
            f"  - id: tenant-b\n    api_key_sha256: {hash_key(KEY_B)}\n    policies: [strict]\n"
            f"  - id: chat\n    api_key_sha256: {hash_key(KEY_CHAT)}\n    policies: [default]\n"
            f"    qos_class: realtime\n"
            f"  - id: flood\n    api_key_sha256: {hash_key(KEY_FLOOD)}\n    policies: [default]\n"
            f"    qos_class: bulk\n    degrade: [ocr, vision]\n"
            f"  - id: limited\n    api_key_sha256: {hash_key(KEY_LIMITED)}\n    policies: [default]\n"
            f"    quota: {{items_per_s: 2, burst: 3}}\n"
            f"  - id: sec\n    api_key_sha256: {hash_key(SECURITY_KEY)}\n    policies: [default, strict]\n")


@pytest.fixture(scope="session")
def tenants_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tenants") / "tenants.yaml"
    path.write_text(tenants_yaml(), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def mesh(tenants_file: Path) -> Iterator[Mesh]:
    """Every service (text, vision, OCR, and a router per lane of config/router.yaml), started once for
    the run and stopped (gracefully) at the end; each serves /metrics too."""
    with shipped_mesh(tenants_file, with_metrics=True) as running:
        yield running


#: `make test` runs the `serial` tests in a second pytest process after the rest; the first writes the files
#: that hold them here, so the second collects those files only (not the whole suite again: ~9 s).
ENV_SERIAL_LIST = "AUDITMESH_SERIAL_LIST"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Before `-m` deselects them: list the files of the `serial` tests in $AUDITMESH_SERIAL_LIST (one
    process writes it: no xdist worker but the first)."""
    target = os.environ.get(ENV_SERIAL_LIST)
    worker = getattr(config, "workerinput", {}).get("workerid")
    if not target or worker not in (None, "gw0"):
        return
    root = Path(str(config.rootpath))
    files = sorted({str(Path(str(item.path)).relative_to(root)) for item in items if item.get_closest_marker("serial")})
    Path(target).write_text("".join(f"{name}\n" for name in files), encoding="utf-8")
