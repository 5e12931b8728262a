"""Per-process CPU accounting of a load step."""

from __future__ import annotations

import os
import sys

import pytest

from bench.cpu import ProcessCpu, process_cpu_s


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_reads_this_process_and_skips_missing_ones() -> None:
    spent = process_cpu_s(os.getpid())
    assert spent is not None and spent > 0
    assert set(ProcessCpu({"me": os.getpid(), "gone": 2**22 + 1}).snapshot()) == {"me"}


def test_usage_is_cores_and_ms_per_request() -> None:
    usage = ProcessCpu.usage({"router": 10.0, "text": 5.0}, {"router": 12.0, "text": 5.5, "new": 1.0},
                             wall_s=2.0, requests=500)
    assert usage == {"router": {"cores": 1.0, "cpu_ms_per_request": 4.0},
                     "text": {"cores": 0.25, "cpu_ms_per_request": 1.0}}
    assert ProcessCpu.usage({"a": 1.0}, {"a": 2.0}, wall_s=1.0, requests=0) == {"a": {"cores": 1.0, "cpu_ms_per_request": None}}
