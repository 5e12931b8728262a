"""The run's provenance: code version and the CPU share other processes used meanwhile."""

from __future__ import annotations

from bench.machine import CpuAccount, code_version, machine


def test_foreign_cpu_share_is_a_share_of_the_machine() -> None:
    share = CpuAccount.start().foreign_cpu_share()
    assert share is None or 0.0 <= share <= 1.0


def test_machine_names_the_code_measured() -> None:
    info = machine()
    assert info["cpus"] and isinstance(info["code"]["uncommitted"], list)
    assert code_version()["commit"] is None or len(code_version()["commit"]) >= 7
