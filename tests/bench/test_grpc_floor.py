"""bench/grpc_floor.py runs end to end at a tiny scale (numbers meaningless; structure checked)."""

from __future__ import annotations

from bench.grpc_floor import run


def test_every_path_is_measured_against_a_real_server() -> None:
    report = run(items=128, rounds=1)
    assert set(report["paths"]) == {"moderate", "batch", "stream"}
    for path in report["paths"].values():
        assert len(path["rounds"]) == 1 and path["server_us_per_item"] >= 0
    assert report["paths"]["batch"]["minus_batch_item_us"] == 0
    assert report["machine"]["foreign_cpu_share"] is None or 0 <= report["machine"]["foreign_cpu_share"] <= 1
