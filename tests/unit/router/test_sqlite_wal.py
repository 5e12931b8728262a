"""Router lanes open one policy store and audit log from several processes at the same instant."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

from services.router.audit_store import AuditStore
from services.router.policy_store import SQLitePolicyStore
from services.router.sqlite_wal import open_shared


def _open_both(folder: str, start: multiprocessing.synchronize.Barrier) -> None:
    start.wait()
    SQLitePolicyStore(Path(folder) / "policy_store.sqlite")
    AuditStore(Path(folder) / "audit.sqlite", retention_s=60.0)


def test_several_processes_open_the_same_new_stores_at_once(tmp_path: Path) -> None:
    context = multiprocessing.get_context("fork")
    for attempt in range(5):  # the race is at the first open of a new file: try a few fresh folders
        folder = tmp_path / f"state-{attempt}"
        start = context.Barrier(6)
        processes = [context.Process(target=_open_both, args=(str(folder), start)) for _ in range(6)]
        for process in processes:
            process.start()
        for process in processes:
            process.join(60)
        assert [p.exitcode for p in processes] == [0] * 6
    assert open_shared(tmp_path / "state-0" / "policy_store.sqlite").execute("PRAGMA journal_mode").fetchone()[0] == "wal"
