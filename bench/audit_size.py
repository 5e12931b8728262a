"""Audit log size per million decisions, for each storage option (issue 12 item 15).

Writes `--records` representative decisions (the shipped default policy, a text item with category
scores, one lexicon span, two metadata entries and three model versions, as the router records them)
into a fresh audit file per option, checkpoints the WAL, and reports the file size per record and
extrapolated to one million decisions, before and after `VACUUM`. Options:

* `json_spaced`: JSON with the default separators (the format before compaction),
* `json_compact`: JSON without spaces (the default now),
* `zlib`: compact JSON, zlib-compressed (`lifecycle.audit_compression: zlib`).

Run: `python -m bench.audit_size --records 20000` (prints one JSON object).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

from services.launcher import ROOT
from services.router.control.audit import AuditInput, AuditRecord, audit_record
from services.router.control.audit_store import AuditStore
from services.router.fusion import BlockMatch, Signals, TextFinding, fuse
from services.router.control.versions import compile_stored_policy

MODELS = [("text_moderation", "1"), ("toxicity_en", "2026-11-28"), ("spam_en", "2026-11-28")]


def sample_records(count: int) -> list[AuditRecord]:
    """`count` decisions like the router's: same shape, varying ids, scores and tenants."""
    policy = compile_stored_policy((ROOT / "config" / "policies" / "default.yaml").read_text(encoding="utf-8"), "policy/default")
    records = []
    now = time.time()
    for i in range(count):
        scores = {"hate": (i % 97) / 100, "spam": (i % 89) / 100, "harassment": (i % 83) / 100,
                  "violence": (i % 79) / 100, "self_harm": 0.01, "sexual": 0.02, "profanity": (i % 7) / 10}
        matches = (BlockMatch("profanity", "damn", 0, 5, 9, "damn", "default"),) if i % 3 == 0 else ()
        verdict = fuse(policy, Signals(texts=[TextFinding(0, "what the damn thing", scores, matches)]))
        source = AuditInput(f"tenant-{i % 5}", f"req-{i:09d}", f"item-{i:09d}", {"channel": "chat", "region": "eu-west"},
                            ["what the damn thing"], policy, verdict, MODELS)
        records.append(audit_record(source, now=now + i * 0.001))
    return records


class SpacedJsonStore(AuditStore):
    """The format before compaction (default json.dumps separators), for the comparison."""

    def _encode(self, record: AuditRecord) -> str | bytes:
        return json.dumps(record.to_json_dict(), ensure_ascii=False)


def measure(option: str, records: Sequence[AuditRecord], folder: Path) -> dict[str, Any]:
    path = folder / f"{option}.sqlite"
    store: AuditStore = (SpacedJsonStore(path, max_pending=len(records) + 1) if option == "json_spaced" else
                         AuditStore(path, max_pending=len(records) + 1, compression="zlib" if option == "zlib" else "none"))
    started = time.perf_counter()
    for record in records:
        store.append(record)
    store.flush()
    write_s = time.perf_counter() - started
    started = time.perf_counter()
    store.query("tenant-1", limit=1000)
    query_ms = (time.perf_counter() - started) * 1000
    store.close()
    size = _checkpointed_size(path)
    db = sqlite3.connect(str(path))
    db.execute("VACUUM")
    db.close()
    vacuumed = _checkpointed_size(path)
    per_million = 1_000_000 / len(records)
    return {"bytes_per_decision": round(size / len(records), 1), "mb_per_million": round(size * per_million / 1e6, 1),
            "bytes_per_decision_after_vacuum": round(vacuumed / len(records), 1),
            "mb_per_million_after_vacuum": round(vacuumed * per_million / 1e6, 1),
            "write_us_per_decision": round(write_s / len(records) * 1e6, 1), "query_1000_ms": round(query_ms, 1)}


def _checkpointed_size(path: Path) -> int:
    db = sqlite3.connect(str(path))
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.audit_size", description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=20000)
    args = parser.parse_args(argv)
    records = sample_records(args.records)
    with tempfile.TemporaryDirectory(prefix="auditmesh-audit-size-") as tmp:
        results = {option: measure(option, records, Path(tmp)) for option in ("json_spaced", "json_compact", "zlib")}
    print(json.dumps({"records": args.records, "options": results}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
