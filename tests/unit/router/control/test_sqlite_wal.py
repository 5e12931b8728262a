"""Router lanes open one policy store and audit log from several processes at the same instant."""

from __future__ import annotations

import multiprocessing
from pathlib import Path
from typing import Any, Callable

from services.router.control.audit_store import AuditStore
from services.router.control.store import SQLitePolicyStore
from services.router.control.sqlite_wal import open_shared


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


class _RacedStore(SQLitePolicyStore):
    """A store whose first pointer change is preceded by another replica importing the same files."""

    other: Callable[[], object] | None = None

    def set_pointer(self, *args: Any, **kwargs: Any) -> Any:
        if self.other is not None:
            other, self.other = self.other, None
            other()  # the other lane wins the race to the pointer
        return super().set_pointer(*args, **kwargs)


def test_a_lane_that_loses_the_race_to_import_the_same_config_still_starts(tmp_path: Path) -> None:
    from services.router.control.control import PolicyControl
    root = Path(__file__).resolve().parents[4]
    policies, tenants = root / "config" / "policies", root / "config" / "tenants.yaml"
    path = tmp_path / "policy_store.sqlite"
    raced = _RacedStore(path)
    winner = PolicyControl(SQLitePolicyStore(path))
    raced.other = lambda: winner.import_files(policies, tenants)
    snapshot = PolicyControl(raced).import_files(policies, tenants)  # ConflictError before the fix
    assert snapshot.tenants.tenants and snapshot.policies
