"""bench/match_bench.py's measurements on small banks: exact recall of the flat scan, near-exact of MIH."""

from __future__ import annotations

from bench.match_bench import index


def test_the_flat_scan_finds_every_perturbed_hash_and_mih_nearly_all() -> None:
    flat, mih = index(3000, "flat"), index(3000, "mih")
    assert flat["recall_at_31"] == 1.0 and flat["query"]["n"] == 300
    assert mih["recall_at_31"] >= 0.95 and mih["kind"] == "mih"
