"""The SQLite bank store keeps the bank store contract (tests/unit/match/bank_store_contract.py); a reload of a bank
that only gained hashes reads and indexes only those."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from services.match.banks import BankSpec, BankStore, Entry, LoadedBanks
from tests.unit.match.bank_store_contract import check_bank_store_contract


def test_the_sqlite_store_keeps_the_contract(tmp_path: Path) -> None:
    store = BankStore(tmp_path / "banks.sqlite")
    try:
        check_bank_store_contract(store)
    finally:
        store.close()


def pdq(seed: int) -> str:
    return np.random.default_rng(seed).integers(0, 256, 32, dtype=np.uint8).tobytes().hex()


def test_a_bank_that_only_gained_hashes_is_extended_not_rebuilt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = BankStore(tmp_path / "banks.sqlite")
    store.put_bank(BankSpec("memes", shared=True, category="spam"))
    store.put_bank(BankSpec("other", shared=True, category="violence"))
    store.add("memes", [Entry("pdq", pdq(i), f"m-{i}") for i in range(200)])
    first = LoadedBanks.load(store)
    assert first.read == 200

    store.add("memes", [Entry("pdq", pdq(1000), "new-1"), Entry("md5", "0" * 31 + "7", "new-2")])
    second = LoadedBanks.load(store, previous=first)
    memes = second.banks[0]
    assert second.read == 2 and memes.version == 3 and memes.base is first.banks[0].base  # the large index kept
    assert second.banks[1] is first.banks[1]  # unchanged: kept as it was
    query = np.frombuffer(bytes.fromhex(pdq(1000)), dtype=np.uint8).reshape(1, 32)
    assert memes.pdq.query(query, 0) == [[("new-1", 0)]] and memes.exact[("md5", "0" * 31 + "7")] == "new-2"
    old = np.frombuffer(bytes.fromhex(pdq(5)), dtype=np.uint8).reshape(1, 32)
    assert memes.pdq.query(old, 0) == [[("m-5", 0)]] and len(memes.pdq) == 201 and memes.size == 202

    # a removal: built whole again, and the removed hash is gone
    store.remove("memes", [Entry("pdq", pdq(5))])
    third = LoadedBanks.load(store, previous=second)
    assert third.read == 201 and third.banks[0].base is not memes.base and third.banks[0].delta == ()
    assert third.banks[0].pdq.query(old, 0) == [[]]

    # a delta layer past MAX_DELTA: the next load builds the bank whole
    monkeypatch.setattr("services.match.banks.MAX_DELTA", 2)
    store.add("memes", [Entry("pdq", pdq(2000 + i), f"d-{i}") for i in range(2)])
    fourth = LoadedBanks.load(store, previous=third)
    assert len(fourth.banks[0].delta) == 2
    store.add("memes", [Entry("pdq", pdq(3000), "d-3")])
    fifth = LoadedBanks.load(store, previous=fourth)
    assert fifth.banks[0].delta == () and len(fifth.banks[0].pdq) == 203 and fifth.read == 204
    store.close()


def test_a_file_written_before_the_versioned_entries_is_upgraded_and_its_old_writers_are_never_trusted(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "banks.sqlite"
    with sqlite3.connect(path) as old:  # the first schema: no epoch, removed_at or added
        old.executescript("""
            CREATE TABLE banks (name TEXT PRIMARY KEY, spec TEXT NOT NULL, version INTEGER NOT NULL, updated REAL NOT NULL);
            CREATE TABLE entries (bank TEXT NOT NULL, signal TEXT NOT NULL, value TEXT NOT NULL, content_id TEXT NOT NULL,
                                  PRIMARY KEY (bank, signal, value)) WITHOUT ROWID;
            CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
            INSERT INTO meta VALUES ('generation', 2);""")
        old.execute("INSERT INTO banks VALUES ('memes', ?, 2, 0)", ('{"name": "memes", "shared": true, "category": "spam"}',))
        old.execute("INSERT INTO entries VALUES ('memes', 'pdq', ?, 'm-1')", (pdq(1),))
    store = BankStore(path)
    first = LoadedBanks.load(store)
    assert [(b.spec.name, b.version, len(b.pdq)) for b in first.banks] == [("memes", 2, 1)]
    store.add("memes", [Entry("pdq", pdq(2), "m-2")])  # this code's first write: every bank re-stamped
    second = LoadedBanks.load(store, previous=first)
    assert second.read == 2 and len(second.banks[0].pdq) == 2
    store.add("memes", [Entry("pdq", pdq(3), "m-3")])
    third = LoadedBanks.load(store, previous=second)
    assert third.read == 1 and third.banks[0].base is second.banks[0].base  # trusted again: only what was added

    def old_writer(statement: str, *args: object) -> None:
        """A router from before the versioned entries, on the same file: no `added`, no `removed_at`."""
        with sqlite3.connect(path) as legacy:
            legacy.execute(statement, args)
            legacy.execute("UPDATE banks SET version = version + 1 WHERE name = 'memes'")
            legacy.execute("UPDATE meta SET value = value + 1 WHERE key = 'generation'")
    old_writer("INSERT INTO entries (bank, signal, value, content_id) VALUES ('memes', 'pdq', ?, 'm-4')", pdq(4))
    old_writer("DELETE FROM entries WHERE bank = 'memes' AND value = ?", pdq(1))
    fourth = LoadedBanks.load(store, previous=third)  # read whole: its hash added and its removal both seen
    def query(seed: int) -> np.ndarray:
        return np.frombuffer(bytes.fromhex(pdq(seed)), dtype=np.uint8).reshape(1, 32)
    assert fourth.read == 3 and fourth.banks[0].pdq.query(query(4), 0) == [[("m-4", 0)]]
    assert fourth.banks[0].pdq.query(query(1), 0) == [[]]
    store.add("memes", [Entry("pdq", pdq(5), "m-5")])  # this code writes again: every bank re-stamped once more
    assert LoadedBanks.load(store, previous=fourth).read == 4
    store.close()
