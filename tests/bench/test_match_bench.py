"""bench/match_bench.py's measurements on small banks: exact recall of the flat scan, near-exact of MIH; a reload
after adding reads only what was added."""

from __future__ import annotations

from bench.match_bench import index, store_reload


def test_the_flat_scan_finds_every_perturbed_hash_and_mih_nearly_all() -> None:
    flat, mih = index(3000, "flat"), index(3000, "mih")
    assert flat["recall_at_31"] == 1.0 and flat["query"]["n"] == 300
    assert mih["recall_at_31"] >= 0.95 and mih["kind"] == "mih"


def test_a_reload_after_adding_reads_only_the_added_hashes() -> None:
    report = store_reload(5000, added=10)
    assert report["reload_after_adding_read"] == 10 and report["reload_after_removing_read"] == 5009
