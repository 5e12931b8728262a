"""Banks of known content in PostgreSQL (issue 42): one bank store shared by every router replica (whose
BankAdmin writes it) and every match service replica (each reads it and swaps in a new index set when its
generation moves). Same contract as the SQLite store (`services.match.banks.BankStore`, a
`BankRepository`): a change is one transaction that raises the bank's version and the store's
generation; an owner check and the change it guards are one transaction (the bank's row locked), so a bank
deleted or re-created for another owner meanwhile is never changed; `changes` reads in one REPEATABLE READ
transaction (one consistent state, never a bank's old spec with its new hashes), and for a bank the reader
holds that has only gained hashes since, only the ones added (an entry's `added` version, a bank's
`epoch` and `removed_at`, as in the SQLite store).

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
from typing import Any, Callable, Mapping, Sequence

import psycopg

from services.match.banks import BankChanges, BankExistsError, BankNotFoundError, BankSpec, Entry, incremental_since
from services.router.control.postgres import MIGRATIONS, PgConnection, PostgresUnavailableError, describe_dsn

__all__ = ["PostgresBankStore"]

_SPEC = "SELECT spec, version FROM match_banks"
_ENTRIES = "SELECT signal, value, content_id FROM match_entries WHERE bank = %s ORDER BY signal, value"
_ADDED = "SELECT signal, value, content_id FROM match_entries WHERE bank = %s AND added > %s ORDER BY signal, value"


def _spec(raw: Any) -> BankSpec:
    return BankSpec(**json.loads(str(raw)))


def _json(spec: BankSpec) -> str:
    return json.dumps(asdict(spec), sort_keys=True)


class PostgresBankStore:
    """See the module docstring. Blocking; thread-safe (one connection, one lock). A `BankRepository`."""

    def __init__(self, dsn: str, *, migrate: bool = True, clock: Callable[[], float] = time.time) -> None:
        """`migrate`: apply the schema's migrations (a router, the CLI); False for a reader (the match service),
        which may connect as a role that can only SELECT the bank tables: it checks they exist instead."""
        self.location = describe_dsn(dsn)  # for logs and errors: never the password
        self._clock = clock
        self._db = PgConnection(dsn, migrate=migrate)
        if not migrate:  # the schema as this code reads it: every migration applied (by a router)
            exists = self._db.fetch("SELECT to_regclass('auditmesh_schema_migrations') IS NOT NULL")
            rows = (self._db.fetch("SELECT coalesce(max(version), 0) FROM auditmesh_schema_migrations")
                    if exists and exists[0][0] else [])
            applied = int(rows[0][0]) if rows else 0
            if applied < len(MIGRATIONS):
                self._db.close()
                raise PostgresUnavailableError(f"PostgreSQL at {self.location} has schema migration {applied}, this match "
                                               f"service reads {len(MIGRATIONS)}: start a router of this version with "
                                               f"lifecycle.postgres_dsn on this database first (it migrates it)")

    def create_bank(self, spec: BankSpec) -> int:
        """Create a new bank; BankExistsError when one of that name exists (see BankStore.create_bank)."""
        def insert(cursor: psycopg.Cursor[Any], version: int) -> None:
            cursor.execute("INSERT INTO match_banks (name, spec, version, updated, epoch) VALUES (%s, %s, 0, 0, %s) "
                           "ON CONFLICT (name) DO NOTHING", (spec.name, _json(spec), _next_generation(cursor)))
            if not cursor.rowcount:
                raise BankExistsError(f"bank {spec.name!r} exists; delete it first, or change its settings on purpose")
        return self._write(spec.name, insert, create=True)

    def put_bank(self, spec: BankSpec) -> int:
        """Create or replace `spec.name`'s spec (its hashes stay); the bank's new version."""
        return self._write(spec.name, lambda cursor, version: cursor.execute(
            "INSERT INTO match_banks (name, spec, version, updated, epoch) VALUES (%s, %s, 0, 0, %s) ON CONFLICT (name) "
            "DO UPDATE SET spec = excluded.spec", (spec.name, _json(spec), _next_generation(cursor))), create=True)

    def update_bank(self, spec: BankSpec) -> int:
        """Replace an existing bank's settings while it has the same owner (see BankStore.update_bank)."""
        return self._write(spec.name, lambda cursor, version: cursor.execute(
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
        return self._write(bank, lambda cursor, version: cursor.executemany(
            "INSERT INTO match_entries (bank, signal, value, content_id, added) VALUES (%s, %s, %s, %s, %s) "
            "ON CONFLICT DO NOTHING", [(bank, e.signal, e.value, e.content_id, version) for e in entries]), owner=owner)

    def remove(self, bank: str, entries: Sequence[Entry], *, owner: str | None = None) -> tuple[int, int]:
        """Remove hashes from `bank` (by signal and value); how many went and its new version."""
        removed = 0

        def change(cursor: psycopg.Cursor[Any], version: int) -> None:
            nonlocal removed
            for e in entries:
                cursor.execute("DELETE FROM match_entries WHERE bank = %s AND signal = %s AND value = %s",
                               (bank, e.signal, e.value))
                removed += cursor.rowcount
            if removed:  # readers holding the bank must build it whole again
                cursor.execute("UPDATE match_banks SET removed_at = %s WHERE name = %s", (version, bank))
        if not entries:
            return 0, self._version(bank, owner)
        version = self._write(bank, change, owner=owner)
        return removed, version

    def remove_content(self, bank: str, content_ids: Sequence[str], *, owner: str | None = None) -> tuple[int, int]:
        """Remove every hash of `bank` banked under one of `content_ids`; how many went and its new version."""
        removed = 0

        def change(cursor: psycopg.Cursor[Any], version: int) -> None:
            nonlocal removed
            cursor.execute("DELETE FROM match_entries WHERE bank = %s AND content_id = ANY(%s)",
                           (bank, list(dict.fromkeys(content_ids))))
            removed = cursor.rowcount
            if removed:
                cursor.execute("UPDATE match_banks SET removed_at = %s WHERE name = %s", (version, bank))
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

    def changes(self, held: Mapping[str, tuple[int, int]]) -> tuple[int, list[BankChanges]]:
        """The generation and every bank, read in one REPEATABLE READ transaction: for a bank `held` names as
        (epoch, version) that has lost no hash since, only the hashes added after that version (see
        BankStore.changes)."""
        def read(cursor: psycopg.Cursor[Any]) -> tuple[int, list[BankChanges]]:
            cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            # a large bank set takes long to read and to turn into entries; the reload is off the request path
            cursor.execute("SET LOCAL statement_timeout = 0")
            cursor.execute("SET LOCAL idle_in_transaction_session_timeout = 0")
            cursor.execute("SELECT value FROM match_meta WHERE key = 'generation'")
            row = cursor.fetchone()
            generation = int(row[0]) if row else 0
            cursor.execute("SELECT name, spec, version, epoch, removed_at FROM match_banks ORDER BY name COLLATE \"C\"")
            out = []
            for name, spec, version, epoch, removed_at in cursor.fetchall():
                since = incremental_since(held.get(str(name)), int(epoch), int(version), int(removed_at))
                cursor.execute(_ADDED.encode(), (name, since))
                out.append(BankChanges(_spec(spec), int(version), int(epoch),
                                       [Entry(str(s), str(v), str(c)) for s, v, c in cursor.fetchall()], incremental=since >= 0))
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

    def _write(self, bank: str, change: Callable[[psycopg.Cursor[Any], int], object], *, create: bool = False,
               owner: str | None = None) -> int:
        """`change(cursor, new version)` in one transaction with the owner check (unless creating; the bank's row
        locked), the bank's version and the store's generation raised; the bank's new version."""
        with self._db.transaction() as cursor:
            if not create:
                self._check_owner(cursor, bank, owner)
            cursor.execute("SELECT version FROM match_banks WHERE name = %s FOR UPDATE", (bank,))
            row = cursor.fetchone()
            version = (int(row[0]) if row else 0) + 1
            change(cursor, version)
            cursor.execute("UPDATE match_banks SET version = %s, updated = %s WHERE name = %s", (version, self._clock(), bank))
            cursor.execute("UPDATE match_meta SET value = value + 1 WHERE key = 'generation'")
            return version


def _next_generation(cursor: psycopg.Cursor[Any]) -> int:
    """Inside a write: the generation it makes (a new bank's epoch; read under the row lock writes take)."""
    cursor.execute("SELECT value FROM match_meta WHERE key = 'generation' FOR UPDATE")
    row = cursor.fetchone()
    return (int(row[0]) if row else 0) + 1
