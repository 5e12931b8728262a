"""Which bank store a process opens: the SQLite file (`services.match.banks.BankStore`, one machine), or
PostgreSQL (`services.match.banks_postgres.PostgresBankStore`, shared by every replica) when a DSN is given.

Example::

    store = open_bank_store("var/banks.sqlite", os.environ.get("AUDITMESH_BANKS_DSN", ""))
"""

from __future__ import annotations

from pathlib import Path

from services.match.banks import BankRepository, BankStore

__all__ = ["open_bank_store"]


def open_bank_store(path: str, dsn: str = "", *, reader: bool = False) -> BankRepository:
    """PostgreSQL at `dsn` when it is set, else the SQLite file at `path`. A `reader` (the match service) never
    migrates PostgreSQL's schema, so it may connect as a role that can only read the bank tables."""
    if dsn:
        from services.match.banks_postgres import PostgresBankStore

        return PostgresBankStore(dsn, migrate=not reader)
    return BankStore(Path(path))
