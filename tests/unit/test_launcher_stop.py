"""Stopping the mesh: SIGTERM, the service's grace period (plus a margin), then SIGKILL for a process
that does not stop (a real, tiny process stands in for a service)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

from services.launcher import STOP_MARGIN_S, Mesh

IGNORES_SIGTERM = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(60)"
STOPS_ON_SIGTERM = "import time; print('ready', flush=True); time.sleep(60)"


def started(code: str) -> subprocess.Popen[bytes]:
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert process.stdout is not None and process.stdout.readline() == b"ready\n"  # its handler is in place
    return process


def test_a_service_that_ignores_sigterm_is_killed_after_its_limit_and_others_stop_at_once() -> None:
    mesh = Mesh(20000)
    stubborn, polite = started(IGNORES_SIGTERM), started(STOPS_ON_SIGTERM)
    mesh.processes.update({"text": stubborn, "vision": polite})
    began = time.monotonic()
    codes = mesh.stop_services(["text", "vision"], timeout_s=0.5)
    assert codes == {"text": -signal.SIGKILL, "vision": -signal.SIGTERM}
    assert 0.5 <= time.monotonic() - began < 5
    assert mesh.processes == {}
    for process in (stubborn, polite):
        assert process.stdout is not None
        process.stdout.close()


def test_the_default_limit_is_the_configs_grace_period_plus_a_margin() -> None:
    mesh = Mesh(20000)
    assert mesh.grace_period_s("router-bulk") == 10.0  # config/router.yaml server.grace_period_s
    assert STOP_MARGIN_S > 0
