"""Issue 12 item 15: the audit SQLite file was world-readable (0644). The audit log and the policy store
(and their -wal / -shm files) are now created 0600 whatever the umask, and older files are narrowed."""

from __future__ import annotations

import os
import time
from pathlib import Path

from services.router.control.audit import AuditInput, AuditRecord, audit_record
from services.router.control.audit_store import AuditStore
from services.router.control.store import SQLitePolicyStore
from services.router.fusion import Verdict
from services.router.policy import PolicyDocument, compile_policy


def modes(folder: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mode & 0o777 for p in folder.iterdir()}


def test_the_audit_log_and_its_wal_files_are_owner_only(tmp_path: Path) -> None:
    previous = os.umask(0o022)  # the usual umask, which made the file 0644
    try:
        store = AuditStore(tmp_path / "audit.sqlite")
        policy = compile_policy(PolicyDocument(name="p", version="1"))
        store.append(audit_record(AuditInput("t", "r", "i", {}, ["text"], policy, Verdict("allow"), []), now=time.time()))
        assert store.flush() == 1
        found = modes(tmp_path)
        assert {"audit.sqlite", "audit.sqlite-wal", "audit.sqlite-shm"} <= set(found)
        assert set(found.values()) == {0o600}, found
        store.close()
    finally:
        os.umask(previous)


def test_the_policy_store_is_owner_only_and_old_files_are_narrowed(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    path.touch()
    os.chmod(path, 0o644)  # left by an older version
    store = SQLitePolicyStore(path)
    store.set_file_hash("x", "y")
    assert set(modes(tmp_path).values()) == {0o600}
    store.close()


def test_compressed_records_read_back_and_mixed_files_work(tmp_path: Path) -> None:
    policy = compile_policy(PolicyDocument(name="p", version="1"))

    def record(item: str) -> AuditRecord:
        return audit_record(AuditInput("t", "r", item, {"k": "v"}, [], policy, Verdict("allow"), []), now=time.time())
    plain = AuditStore(tmp_path / "audit.sqlite")
    plain.append(record("plain"))
    plain.close()
    compressed = AuditStore(tmp_path / "audit.sqlite", compression="zlib")
    compressed.append(record("zipped"))
    records, _ = compressed.query("t")
    assert [(r.item_id, dict(r.metadata)) for r in records] == [("plain", {"k": "v"}), ("zipped", {"k": "v"})]
    compressed.close()
