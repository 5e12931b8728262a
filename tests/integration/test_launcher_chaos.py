"""The real launcher (`make run`'s `python -m services.launcher`) under load: kill -9 each child in
turn (text, vision, OCR, each router lane, the match service) and check that it comes back, that the rest kept serving
without a gap, that calls during a modality outage got degraded answers per the tenant's policy and
no errors, and that the router uses a restarted modality service within ~1.5 s of it serving
(regressions: a killed text service stopped all five processes, a killed bulk lane took the
interactive lane down, and vision took 9.7 s after SERVING to be used again). Figures:
`python -m bench.launcher_chaos`."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from bench.launcher_chaos import LANE_KEYS, ChaosMesh, KillResult, Load
from services.launcher import MATCH, MODALITIES

# Slow (five kill -9 / restart cycles, each with model reloads): `make test` and `make test-slow` run it, `make test-fast` skips it.
pytestmark = pytest.mark.slow

SETTLE_S = 1.5
#: The longest a lane that was not killed may go without an answer (its calls come every 50-250 ms).
MAX_GAP_S = 1.0
#: From the restarted service answering SERVING to the first call that uses it.
MAX_RECOVERY_S = 1.5


def check_kill(result: KillResult) -> None:
    service = result.service
    assert result.outage_s < 30, result
    assert result.recovery_s < MAX_RECOVERY_S, result
    for lane, seen in result.lanes.items():
        if lane == service:
            assert set(seen.errors) <= {"UNAVAILABLE"}, result  # its own callers: refused while it is down
            continue
        assert seen.errors == {}, result  # nobody else saw an error
        assert seen.max_gap_s <= MAX_GAP_S, result  # nor a pause
    if service in MODALITIES:
        assert result.off_policy == 0, result
        # The kill had an effect each lane saw: degraded answers naming the stage (proves the kill happened).
        for lane, seen in result.lanes.items():
            assert any(key.startswith(f"{service}:") for key in seen.degradations), (lane, result)


def test_every_child_killed_in_turn_comes_back_and_the_rest_keep_serving(tmp_path: Path) -> None:
    order = ("text", "vision", "ocr", *LANE_KEYS)
    with ChaosMesh.start(tmp_path) as chaos:
        assert {*order, MATCH} == set(chaos.mesh.services)
        with Load(chaos.mesh) as load:
            time.sleep(SETTLE_S)
            for service in order:
                check_kill(chaos.kill_and_recover(service, load))
                time.sleep(SETTLE_S)
            # The match service: no shipped policy calls it, so no answer may change while it is down.
            killed = time.monotonic()
            pid = chaos.pid_of(MATCH)
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
            chaos.wait_new_serving(MATCH, pid, 60.0)
            during = [c for c in load.snapshot() if c.started >= killed]
            assert during and all(c.outcome == "ok" for c in during), during
            settled = time.monotonic()
            time.sleep(1.0)
            last = [c for c in load.snapshot() if c.started >= settled]
        assert last and all(c.outcome == "ok" for c in last), last  # all back, nothing degraded
        log = chaos.log_text()
        for service in (*order, MATCH):
            assert f"{service} exited (killed by signal SIGKILL)" in log and f"restarted {service} (pid " in log
            assert f"{service} is SERVING again" in log
    assert chaos.process.returncode == 0  # SIGTERM: an orderly stop
    assert chaos.leftovers == []  # and every child stopped with it
