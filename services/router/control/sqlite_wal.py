"""Opening a SQLite database that several router processes share (the lanes of one router are
replicas of one policy store and audit log).

`PRAGMA journal_mode=WAL` needs a moment of exclusive access, and SQLite answers "database is
locked" at once, without waiting out the connection's busy timeout, when another process is
setting up the same new file at that instant (two lanes starting together). So the switch is retried
until the timeout; statements after it wait on the busy timeout as usual.

Permissions: the files hold tenant key digests and decisions, so the database is created 0600 (before
SQLite opens it, whatever the umask), and SQLite gives its `-wal` and `-shm` files the database's
permissions; a file left by an older version with wider permissions is narrowed to 0600 at open.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from pathlib import Path
from typing import Iterator

RETRY_S = 0.05
#: Owner read/write only: the database and its -wal / -shm files.
FILE_MODE = 0o600
SIDE_FILES = ("-wal", "-shm")


def open_shared(path: Path, timeout_s: float = 10.0) -> sqlite3.Connection:
    """A connection to `path` (created with its folder if missing) in WAL mode, autocommit, usable from
    several threads; sqlite3.OperationalError if the file stays locked for `timeout_s`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    os.close(os.open(path, os.O_RDWR | os.O_CREAT, FILE_MODE))  # created 0600, never world-readable
    db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None, timeout=timeout_s)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            db.execute("PRAGMA journal_mode=WAL")
            restrict(path)
            return db
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() >= deadline:
                db.close()
                raise
            time.sleep(RETRY_S)


def restrict(path: Path) -> None:
    """Narrow the database and its -wal / -shm files to 0600 (those that exist)."""
    for file in (path, *(path.with_name(path.name + suffix) for suffix in SIDE_FILES)):
        try:
            if os.stat(file).st_mode & 0o777 != FILE_MODE:
                os.chmod(file, FILE_MODE)
        except FileNotFoundError:
            pass


@contextlib.contextmanager
def write_transaction(db: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """`BEGIN IMMEDIATE` ... `COMMIT` on an autocommit connection (`open_shared`), all or nothing: any error,
    in the body or in `COMMIT` itself (a full disk), rolls back, so the connection is never left inside a
    transaction that every later write would trip on.

    Example::

        with write_transaction(db):
            db.executemany("INSERT ...", rows)
    """
    db.execute("BEGIN IMMEDIATE")
    try:
        yield db
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
