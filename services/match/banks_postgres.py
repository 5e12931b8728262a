"""Banks of known content in PostgreSQL (issue 42): one bank store shared by every router replica (whose
BankAdmin writes it) and every match service replica (each reads it and swaps in a new index set when its
generation moves). Same contract as the SQLite store (`services.match.banks.BankStore`, a
`BankRepository`): a change is one transaction that raises the bank's version and the store's
generation; an owner check and the change it guards are one transaction (the bank's row locked), so a bank
deleted or re-created for another owner meanwhile is never changed; a snapshot is read in one
REPEATABLE READ transaction (one consistent state, never a bank's old spec with its new hashes).

The tables come with the router's migrations (services/router/control/postgres.py, migration 4), applied
by whichever process connects first.

Example::

    store = PostgresBankStore("postgresql://auditmesh@db/auditmesh")
    store.put_bank(BankSpec("known_spam", shared=True, category="spam"))
    banks = LoadedBanks.load(store)
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from typing import Any, Callable, Sequence

import psycopg

from services.match.banks import BankExistsError, BankNotFoundError, BankSpec, Entry
from services.router.control.postgres import PgConnection, describe_dsn

__all__ = ["PostgresBankStore"]

_SPEC = "SELECT spec, version FROM match_banks"
_ENTRIES = "SELECT signal, value, content_id FROM match_entries WHERE bank = %s ORDER BY signal, value"


def _spec(raw: Any) -> BankSpec:
    return BankSpec(**json.loads(str(raw)))


def _json(spec: BankSpec) -> str:
    return json.dumps(asdict(spec), sort_keys=True)


class PostgresBankStore:
    """See the module docstring. Blocking; thread-safe (one connection, one lock). A `BankRepository`."""

    def __init__(self, dsn: str, *, clock: Callable[[], float] = time.time) -> None:
        self.location = describe_dsn(dsn)  # for logs and errors: never the password
        self._clock = clock
        self._db = PgConnection(dsn)

    def create_bank(self, spec: BankSpec) -> int:
        """Create a new bank; BankExistsError when one of that name exists (see BankStore.create_bank)."""
        def insert(cursor: psycopg.Cursor[Any]) -> None:
            cursor.execute("INSERT INTO match_banks (name, spec, version, updated) VALUES (%s, %s, 0, 0) "
                           "ON CONFLICT (name) DO NOTHING", (spec.name, _json(spec)))
            if not cursor.rowcount:
                raise BankExistsError(f"bank {spec.name!r} exists; delete it first, or change its settings on purpose")
        return self._write(spec.name, insert, create=True)

    def put_bank(self, spec: BankSpec) -> int:
        """Create or replace `spec.name`'s spec (its hashes stay); the bank's new version."""
        return self._write(spec.name, lambda cursor: cursor.execute(
            "INSERT INTO match_banks (name, spec, version, updated) VALUES (%s, %s, 0, 0) ON CONFLICT (name) "
            "DO UPDATE SET spec = excluded.spec", (spec.name, _json(spec))), create=True)

    def update_bank(self, spec: BankSpec) -> int:
        """Replace an existing bank's settings while it has the same owner (see BankStore.update_bank)."""
        return self._write(spec.name, lambda cursor: cursor.execute(
            "UPDATE match_banks SET spec = %s WHERE name = %s", (_json(spec), spec.name)), owner=spec.owner)

    def delete_bank(self, name: str, *, owner: str | None = None) -> None:
        """Delete a bank and its hashes (with `owner`: only that owner's bank); BankNotFoundError otherwise."""
        with self._db.transaction() as cursor:
            self._check_owner(cursor, name, owner)
            cursor.execute("DELETE FROM match_entries WHERE bank = %s", (name,))
            cursor.execute("DELETE FROM match_banks WHERE name = %s", (name,))
            cursor.execute("UPDATE match_meta SET value = value + 1 WHERE key = 'generation'")

    def add(self, bank: str, entries: Sequence[Entry], *, owner: str | None = None) -> int:
        """Add hashes to `bank` (one already there keeps its content id); its new version (unchanged when
        `entries` is empty)."""
        if not entries:
            return self._version(bank, owner)
        return self._write(bank, lambda cursor: cursor.executemany(
            "INSERT INTO match_entries (bank, signal, value, content_id) VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING",
            [(bank, e.signal, e.value, e.content_id) for e in entries]), owner=owner)

    def remove(self, bank: str, entries: Sequence[Entry], *, owner: str | None = None) -> tuple[int, int]:
        """Remove hashes from `bank` (by signal and value); how many went and its new version."""
        removed = 0

        def change(cursor: psycopg.Cursor[Any]) -> None:
            nonlocal removed
            for e in entries:
                cursor.execute("DELETE FROM match_entries WHERE bank = %s AND signal = %s AND value = %s",
                               (bank, e.signal, e.value))
                removed += cursor.rowcount
        if not entries:
            return 0, self._version(bank, owner)
        version = self._write(bank, change, owner=owner)
        return removed, version

    def remove_content(self, bank: str, content_ids: Sequence[str], *, owner: str | None = None) -> tuple[int, int]:
        """Remove every hash of `bank` banked under one of `content_ids`; how many went and its new version."""
        removed = 0

        def change(cursor: psycopg.Cursor[Any]) -> None:
            nonlocal removed
            cursor.execute("DELETE FROM match_entries WHERE bank = %s AND content_id = ANY(%s)",
                           (bank, list(dict.fromkeys(content_ids))))
            removed = cursor.rowcount
        if not content_ids:
            return 0, self._version(bank, owner)
        version = self._write(bank, change, owner=owner)
        return removed, version

    def bank(self, name: str) -> tuple[BankSpec, int] | None:
        """One bank's spec and version; None when there is none."""
        rows = self._db.fetch(f"{_SPEC} WHERE name = %s", (name,))
        return (_spec(rows[0][0]), int(rows[0][1])) if rows else None

    def banks(self) -> list[tuple[BankSpec, int]]:
        """Every bank's spec and version, by name."""
        return [(_spec(spec), int(version)) for spec, version in self._db.fetch(f"{_SPEC} ORDER BY name COLLATE \"C\"")]

    def counts(self, bank: str) -> dict[str, int]:
        """How many hashes of each signal type `bank` holds."""
        rows = self._db.fetch("SELECT signal, count(*) FROM match_entries WHERE bank = %s GROUP BY signal", (bank,))
        return {str(signal): int(count) for signal, count in rows}

    def entries(self, bank: str) -> list[Entry]:
        return [Entry(str(signal), str(value), str(content_id)) for signal, value, content_id in self._db.fetch(_ENTRIES, (bank,))]

    def snapshot(self) -> tuple[int, list[tuple[BankSpec, int, list[Entry]]]]:
        """The generation and every bank with its hashes, read in one REPEATABLE READ transaction."""
        def read(cursor: psycopg.Cursor[Any]) -> tuple[int, list[tuple[BankSpec, int, list[Entry]]]]:
            cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            cursor.execute("SET LOCAL statement_timeout = 0")  # a large bank set takes long to read; the reload is off the request path
            cursor.execute("SELECT value FROM match_meta WHERE key = 'generation'")
            row = cursor.fetchone()
            generation = int(row[0]) if row else 0
            cursor.execute("SELECT name, spec, version FROM match_banks ORDER BY name COLLATE \"C\"")
            banks = cursor.fetchall()
            out = []
            for name, spec, version in banks:
                cursor.execute(_ENTRIES.encode(), (name,))
                out.append((_spec(spec), int(version), [Entry(str(s), str(v), str(c)) for s, v, c in cursor.fetchall()]))
            return generation, out
        return self._db.retrying(read)

    def generation(self) -> int:
        """Raised by every change: a reader reloads when it differs from what it loaded."""
        rows = self._db.fetch("SELECT value FROM match_meta WHERE key = 'generation'")
        return int(rows[0][0]) if rows else 0

    def close(self) -> None:
        self._db.close()

    @staticmethod
    def _check_owner(cursor: psycopg.Cursor[Any], bank: str, owner: str | None) -> None:
        """Inside a transaction: lock the bank's row; BankNotFoundError unless it exists and (with `owner`) is
        that owner's."""
        cursor.execute("SELECT spec FROM match_banks WHERE name = %s FOR UPDATE", (bank,))
        row = cursor.fetchone()
        if row is None or (owner is not None and _spec(row[0]).owner != owner):
            raise BankNotFoundError(f"bank {bank!r} does not exist; create it first")

    def _version(self, bank: str, owner: str | None) -> int:
        """The bank's version (a change with nothing to change raises none), checking it exists (and its owner)."""
        with self._db.transaction() as cursor:
            self._check_owner(cursor, bank, owner)
            cursor.execute("SELECT version FROM match_banks WHERE name = %s", (bank,))
            row = cursor.fetchone()
            return int(row[0]) if row else 0

    def _write(self, bank: str, change: Callable[[psycopg.Cursor[Any]], object], *, create: bool = False,
               owner: str | None = None) -> int:
        """`change` in one transaction with the owner check (unless creating), the bank's version and the
        store's generation raised; the bank's new version."""
        with self._db.transaction() as cursor:
            if not create:
                self._check_owner(cursor, bank, owner)
            change(cursor)
            cursor.execute("UPDATE match_banks SET version = version + 1, updated = %s WHERE name = %s RETURNING version",
                           (self._clock(), bank))
            row = cursor.fetchone()
            cursor.execute("UPDATE match_meta SET value = value + 1 WHERE key = 'generation'")
            return int(row[0]) if row else 0
