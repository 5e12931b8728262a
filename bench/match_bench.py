"""Known-content matching (issue 42): hashing cost, index query latency, memory and recall, and the text
fingerprint's false-match rate, printed as JSON.

    python -m bench.match_bench                                  # 10k, 100k, 1M PDQ hashes
    python -m bench.match_bench --sizes 10000 --sizes 10000000   # any sizes (10M needs ~3 GB while building)

* `hashing`: milliseconds to decode and hash one image (PDQ + MD5 + SHA-256; with the 8 dihedral variants)
  at several sizes (scikit-image's sample photos, resized), and one text (canonical form, SHA-256, SimHash).
* `index`: per bank size (random 256-bit hashes: what matters for scale is the count, not the content),
  the flat scan and multi-index hashing (`services/match/index.py`): build seconds, resident memory the
  index added (RSS), query P50/P99 at distance 31, and recall against the exact answer on queries that are
  stored hashes with 1-31 bits flipped. Targets: 10M hashes in < 2 GB, P99 < 5 ms at 1M, recall >= 0.99.
* `store_reload`: a bank of `--reload-size` hashes in the SQLite bank store: its first load, a reload after
  100 hashes were added (only those read and indexed: the bank is extended, `LoadedBanks.load`), and one
  after a hash was removed (the bank built whole again): seconds, hashes read, memory of the first load.
* `text_false_matches`: the benign messages of the naturalistic corpus's training split against each other:
  the share of pairs within the default text distance (a bank of benign-looking spam would match that share
  of unrelated benign messages), and the smallest distance seen.

Compare only within one run on a quiet machine (`foreign_cpu_share` near 0).
"""

from __future__ import annotations

import argparse
import io
import json
import resource
import time
from typing import Any, Sequence

import numpy as np

from bench.machine import CpuAccount, code_version
from bench.stats import summarize_ms
from services.match.banks import BankSpec
from services.match.index import HammingIndex
from services.match.signals import image_signals, text_signals

__all__ = ["main"]

DEFAULT_SIZES = (10_000, 100_000, 1_000_000)
QUERIES = 300


def _rss_mb() -> float:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * resource.getpagesize() / 2 ** 20


def hashing() -> dict[str, Any]:
    """Milliseconds per image (by longest side) and per text."""
    from PIL import Image

    from bench.sample_photos import photo_bytes

    source = Image.open(io.BytesIO(photo_bytes("astronaut.png"))).convert("RGB")
    out: dict[str, Any] = {}
    for side in (256, 512, 1024, 2048):
        image = source.resize((side, side))
        buffer = io.BytesIO()
        image.save(buffer, "JPEG", quality=90)
        data = buffer.getvalue()
        for dihedral in (False, True):
            from services.common.image_decode import decode_rgb

            times = []
            for _ in range(5):
                started = time.perf_counter()
                image_signals(data, decode_rgb(data), dihedral=dihedral)
                times.append(time.perf_counter() - started)
            out[f"image_{side}px{'_dihedral' if dihedral else ''}"] = summarize_ms(times)["p50_ms"]
    text = "FREE crypto airdrop! Connect your wallet at https://claim-airdrop.xyz/r/8831 before midnight " * 3
    times = []
    for _ in range(200):
        started = time.perf_counter()
        text_signals(text)
        times.append(time.perf_counter() - started)
    out["text_270_chars"] = summarize_ms(times)["p50_ms"]
    return out


def index(size: int, kind: str, seed: int = 0) -> dict[str, Any]:
    """Build a `kind` index over `size` random hashes; query latency and recall at distance 31."""
    rng = np.random.default_rng(seed)
    hashes = rng.integers(0, 256, size=(size, 32), dtype=np.uint8)
    ids = [f"c{i}" for i in range(size)]
    before = _rss_mb()
    started = time.perf_counter()
    built = HammingIndex.build(hashes, ids, mih_from=0 if kind == "mih" else size + 1)
    build_s = time.perf_counter() - started
    memory = _rss_mb() - before
    picked = rng.choice(size, QUERIES, replace=False)
    queries = hashes[picked].copy()
    flips = rng.integers(1, 32, size=QUERIES)
    for row, count in enumerate(flips):
        bits = np.unpackbits(queries[row])
        bits[rng.choice(256, count, replace=False)] ^= 1
        queries[row] = np.packbits(bits)
    times, found = [], 0
    for row in range(QUERIES):
        started = time.perf_counter()
        answer = built.query(queries[row], 31)[0]
        times.append(time.perf_counter() - started)
        found += any(content_id == f"c{picked[row]}" for content_id, _ in answer)
    del built, hashes, ids
    return {"size": size, "kind": kind, "build_s": round(build_s, 2), "index_rss_mb": round(memory, 1),
            "hashes_mb": round(size * 32 / 2 ** 20, 1),
            "query": summarize_ms(times), "recall_at_31": round(found / QUERIES, 4)}


def text_false_matches(limit: int = 3000) -> dict[str, Any]:
    """Pairs of benign corpus messages within the default text distance."""
    from bench.natural_quality import load_split

    texts = [str(r["text"]) for r in load_split("en", "train") + load_split("zh", "train") if not r["labels"]][:limit]
    bits = np.unpackbits(np.frombuffer(b"".join(text_signals(t).simhash for t in texts), dtype=np.uint8)
                         .reshape(len(texts), 32), axis=1).astype(bool)
    threshold = BankSpec("probe", shared=True, category="spam").text_distance
    within, smallest, pairs = 0, 256, 0
    for row in range(len(texts) - 1):
        distances = (bits[row + 1:] != bits[row]).sum(axis=1)
        within += int((distances <= threshold).sum())
        smallest = min(smallest, int(distances.min()))
        pairs += len(distances)
    return {"messages": len(texts), "pairs": pairs, "text_distance": threshold, "pairs_within": within,
            "false_match_rate": within / pairs, "smallest_distance": smallest}


def store_reload(size: int, added: int = 100, seed: int = 1) -> dict[str, Any]:
    """A bank of `size` random PDQ hashes in a SQLite bank store: seconds and resident memory of a first load,
    then of a reload after `added` hashes were added (the bank extended with them, not rebuilt) and after one
    was removed (built whole again)."""
    import tempfile
    from pathlib import Path

    from services.match.banks import BankStore, Entry, LoadedBanks

    rng = np.random.default_rng(seed)
    with tempfile.TemporaryDirectory() as folder:
        store = BankStore(Path(folder) / "banks.sqlite")
        store.put_bank(BankSpec("big", shared=True, category="spam"))
        hashes = rng.integers(0, 256, (size + added, 32), dtype=np.uint8)
        started = time.perf_counter()
        for start in range(0, size, 100_000):
            store.add("big", [Entry("pdq", row.tobytes().hex(), f"c-{start + i}") for i, row in enumerate(hashes[start:min(size, start + 100_000)])])
        written_s = time.perf_counter() - started
        before = _rss_mb()
        started = time.perf_counter()
        first = LoadedBanks.load(store)
        full_s = time.perf_counter() - started
        held_mb = _rss_mb() - before
        store.add("big", [Entry("pdq", row.tobytes().hex(), f"n-{i}") for i, row in enumerate(hashes[size:])])
        started = time.perf_counter()
        extended = LoadedBanks.load(store, previous=first)
        extended_s = time.perf_counter() - started
        assert len(extended.banks[0].pdq) == size + added and extended.banks[0].base is first.banks[0].base
        store.remove("big", [Entry("pdq", hashes[0].tobytes().hex())])
        started = time.perf_counter()
        rebuilt = LoadedBanks.load(store, previous=extended)
        rebuilt_s = time.perf_counter() - started
        store.close()
    return {"hashes": size, "added": added, "write_s": round(written_s, 2), "full_load_s": round(full_s, 3),
            "full_load_rss_mb": round(held_mb, 1), "reload_after_adding_s": round(extended_s, 4),
            "reload_after_adding_read": extended.read, "reload_after_removing_s": round(rebuilt_s, 3),
            "reload_after_removing_read": rebuilt.read}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.match_bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, action="append", help="bank sizes (repeatable; default 10k, 100k, 1M)")
    parser.add_argument("--kinds", action="append", choices=("flat", "mih"), help="index kinds (default both)")
    parser.add_argument("--skip-hashing", action="store_true", help="index sizes only")
    parser.add_argument("--reload-size", type=int, default=1_000_000,
                        help="hashes of the bank whose reloads through the SQLite store are timed (0: skip; default 1M)")
    args = parser.parse_args(argv)
    account = CpuAccount.start()
    report: dict[str, Any] = {"bench": "match", **code_version()}
    if not args.skip_hashing:
        report["hashing_ms"] = hashing()
    report["index"] = [index(size, kind) for size in (args.sizes or DEFAULT_SIZES) for kind in (args.kinds or ("flat", "mih"))]
    if not args.skip_hashing:
        report["text_false_matches"] = text_false_matches()
    if args.reload_size:
        report["store_reload"] = store_reload(args.reload_size)
    report["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # the whole process
    report["foreign_cpu_share"] = account.foreign_cpu_share()
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
