"""Opening a SQLite database that several router processes share (the lanes of one router are
replicas of one policy store and audit log).

`PRAGMA journal_mode=WAL` needs a moment of exclusive access, and SQLite answers "database is
locked" at once, without waiting out the connection's busy timeout, when another process is
setting up the same new file at that instant (two lanes starting together). So the switch is retried
until the timeout; statements after it wait on the busy timeout as usual.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

RETRY_S = 0.05


def open_shared(path: Path, timeout_s: float = 10.0) -> sqlite3.Connection:
    """A connection to `path` (created with its folder if missing) in WAL mode, autocommit, usable from
    several threads; sqlite3.OperationalError if the file stays locked for `timeout_s`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None, timeout=timeout_s)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            db.execute("PRAGMA journal_mode=WAL")
            return db
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() >= deadline:
                db.close()
                raise
            time.sleep(RETRY_S)
