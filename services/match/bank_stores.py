"""Which bank store a process opens: the SQLite file (`services.match.banks.BankStore`, one machine), or
PostgreSQL (`services.match.banks_postgres.PostgresBankStore`, shared by every replica) when a DSN is given.

Example::

    store = open_bank_store("var/banks.sqlite", os.environ.get("AUDITMESH_BANKS_DSN", ""))
"""

from __future__ import annotations

from pathlib import Path

from services.match.banks import BankRepository, BankStore

__all__ = ["open_bank_store"]


def open_bank_store(path: str, dsn: str = "") -> BankRepository:
    """PostgreSQL at `dsn` when it is set (its migrations applied), else the SQLite file at `path`."""
    if dsn:
        from services.match.banks_postgres import PostgresBankStore

        return PostgresBankStore(dsn)
    return BankStore(Path(path))
