"""Reviewers' labels in PostgreSQL (`lifecycle.postgres_dsn`), shared by every router replica: what one
replica's admin API stores, any replica's exports. Same contract as the SQLite store
(services/router/control/label_store.py): one row per (tenant, item id), a later label replacing an
earlier one; every statement names one tenant; `check_items` before anything is stored; at most
`max_per_tenant` items per tenant, checked and written in one transaction under a per-tenant advisory
lock, so two replicas storing for one tenant at once cannot pass the bound together.

Example::

    store = PostgresLabelStore("postgresql://auditmesh@db/auditmesh")
    store.submit("acme", [Label("m-1", "free airdrop, connect your wallet", {"custom.crypto_scam": 1}, "rev-7")])
    labels, token = store.page("acme", limit=500)
"""

from __future__ import annotations

import time
import zlib
from typing import Any, Callable, Sequence

from services.router.control.appeals import APPEAL_COLUMNS, Appeal, already_resolved, appeal_from_row, appeal_row, check_appeal_room
from services.router.control.label_store import (DEFAULT_PAGE, SELECT_LABELS, UPSERT_LABEL, Label, Submitted, check_delete,
                                                 check_item, check_items, check_page_limit, check_room, decode_token,
                                                 label_row, merged_label, one_label, page_of)
from services.router.control.postgres import PgConnection
from services.trainer.examples import MAX_EXAMPLES

#: Serialises one tenant's submissions across replicas (the bound is per tenant): lock key = this + crc32(tenant).
_TENANT_LOCK = 0x6C61_0000_0000
#: The same for one tenant's appeals (their bound).
_APPEAL_LOCK = 0x6170_0000_0000
_APPEAL_SELECT = f"SELECT {', '.join(APPEAL_COLUMNS)} FROM appeals"


#: `UPSERT_LABEL` with PostgreSQL's placeholders.
_UPSERT = UPSERT_LABEL.replace("?", "%s")


def _typed(rows: Sequence[tuple[Any, ...]]) -> list[tuple[str, str, str, str, float]]:
    """`SELECT_LABELS` rows as `page_of` reads them (the driver's JSON and numeric types made plain)."""
    return [(str(a), str(b), str(c), str(d), float(e)) for a, b, c, d, e in rows]


class PostgresLabelStore:
    """See the module docstring. Blocking; thread-safe (one connection, one lock)."""

    def __init__(self, dsn: str, *, max_per_tenant: int = MAX_EXAMPLES, clock: Callable[[], float] = time.time) -> None:
        self.max_per_tenant = max_per_tenant
        self._clock = clock
        self._db = PgConnection(dsn)

    def submit(self, tenant: str, items: Sequence[Label]) -> Submitted:
        """Store `items` for `tenant` in one transaction (all or nothing): `check_items` first, then the
        tenant's bound (LimitExceededError)."""
        check_items(items)
        now = self._clock()
        latest = {item.item_id: item for item in items}  # the same id twice in one call: the last counts
        with self._db.transaction() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", (_TENANT_LOCK + zlib.crc32(tenant.encode()),))
            cursor.execute("SELECT item_id FROM labels WHERE tenant = %s AND item_id = ANY(%s)", (tenant, list(latest)))
            known = {row[0] for row in cursor.fetchall()}
            cursor.execute("SELECT count(*) FROM labels WHERE tenant = %s", (tenant,))
            row = cursor.fetchone()
            total = int(row[0]) if row else 0
            added = len(latest) - len(known)
            check_room(tenant, total, added, self.max_per_tenant)
            cursor.executemany(_UPSERT, [label_row(tenant, item, now) for item in latest.values()])
        return Submitted(added, len(known), total + added)

    def page(self, tenant: str, *, limit: int = DEFAULT_PAGE, page_token: str = "") -> tuple[list[Label], str]:
        """`tenant`'s labels in item-id order after `page_token` (see LabelStore.page)."""
        check_page_limit(limit)
        # Byte order (collation "C"), whatever the database's locale: the page token is the last item id.
        rows = self._db.fetch(f"{SELECT_LABELS} WHERE tenant = %s "
                              "AND item_id COLLATE \"C\" > %s ORDER BY item_id COLLATE \"C\" LIMIT %s",
                              (tenant, decode_token(page_token), limit + 1))
        return page_of(_typed(rows), limit)

    def count(self, tenant: str) -> int:
        """How many items `tenant` has labels for."""
        rows = self._db.fetch("SELECT count(*) FROM labels WHERE tenant = %s", (tenant,))
        return int(rows[0][0]) if rows else 0

    def merge(self, tenant: str, label: Label) -> bool:
        """Store `label` merged into the item's label, read and written in one transaction under the tenant's lock
        (see LabelStore.merge)."""
        check_item(label)
        with self._db.transaction() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", (_TENANT_LOCK + zlib.crc32(tenant.encode()),))
            cursor.execute(f"{SELECT_LABELS} WHERE tenant = %s AND item_id = %s", (tenant, label.item_id))
            existing = one_label(_typed(cursor.fetchall()))
            result = merged_label(existing, label)
            if result is None:
                return False
            if existing is None:
                cursor.execute("SELECT count(*) FROM labels WHERE tenant = %s", (tenant,))
                row = cursor.fetchone()
                check_room(tenant, int(row[0]) if row else 0, 1, self.max_per_tenant)
            cursor.execute(_UPSERT, label_row(tenant, result, self._clock()))
        return True

    def label_of(self, tenant: str, item_id: str) -> Label | None:
        """`tenant`'s label of `item_id`, or None."""
        return one_label(_typed(self._db.fetch(f"{SELECT_LABELS} WHERE tenant = %s AND item_id = %s", (tenant, item_id))))

    def delete(self, tenant: str, item_ids: Sequence[str]) -> int:
        """Delete `tenant`'s labels of `item_ids` and those items' appeals in one transaction; how many labels
        there were (see LabelStore.delete)."""
        check_delete(item_ids)
        with self._db.transaction() as cursor:
            unique = list(dict.fromkeys(item_ids))
            cursor.execute("DELETE FROM appeals WHERE tenant = %s AND item_id = ANY(%s)", (tenant, unique))
            cursor.execute("DELETE FROM labels WHERE tenant = %s AND item_id = ANY(%s)", (tenant, unique))
            return int(cursor.rowcount)

    def purge_tenant(self, tenant: str) -> tuple[int, int]:
        """Delete every label and appeal of `tenant` in one transaction (see LabelStore.purge_tenant)."""
        with self._db.transaction() as cursor:
            cursor.execute("DELETE FROM appeals WHERE tenant = %s", (tenant,))
            appeals = int(cursor.rowcount)
            cursor.execute("DELETE FROM labels WHERE tenant = %s", (tenant,))
            return int(cursor.rowcount), appeals

    def add_appeal(self, appeal: Appeal) -> None:
        """Store a new appeal (see LabelStore.add_appeal)."""
        with self._db.transaction() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", (_APPEAL_LOCK + zlib.crc32(appeal.tenant.encode()),))
            cursor.execute("SELECT count(*), count(*) FILTER (WHERE audit_id = %s) FROM appeals WHERE tenant = %s",
                           (appeal.audit_id, appeal.tenant))
            row = cursor.fetchone()
            check_appeal_room(appeal, int(row[0]) if row else 0, int(row[1]) if row else 0)
            cursor.execute(f"INSERT INTO appeals ({', '.join(APPEAL_COLUMNS)}) VALUES ({', '.join(['%s'] * len(APPEAL_COLUMNS))})",
                           appeal_row(appeal))

    def get_appeal(self, tenant: str, appeal_id: str) -> Appeal | None:
        """`tenant`'s appeal `appeal_id`, or None."""
        rows = self._db.fetch(f"{_APPEAL_SELECT} WHERE tenant = %s AND appeal_id = %s", (tenant, appeal_id))
        return appeal_from_row(rows[0]) if rows else None

    def save_resolution(self, appeal: Appeal) -> None:
        """Record a resolved appeal's outcome if it is still open (see LabelStore.save_resolution)."""
        with self._db.transaction() as cursor:
            cursor.execute("UPDATE appeals SET status = %s, reviewer = %s, note = %s, resolved_at = %s WHERE tenant = %s "
                           "AND appeal_id = %s AND status = 'open'", (appeal.status, appeal.reviewer, appeal.note,
                                                                     appeal.resolved_at, appeal.tenant, appeal.appeal_id))
            changed = cursor.rowcount
        if not changed:
            raise already_resolved(self.get_appeal(appeal.tenant, appeal.appeal_id) or appeal)

    def appeals_of(self, tenant: str, audit_id: str) -> list[Appeal]:
        """`tenant`'s appeals of decision `audit_id`, oldest first."""
        rows = self._db.fetch(f"{_APPEAL_SELECT} WHERE tenant = %s AND audit_id = %s ORDER BY submitted_at, appeal_id",
                              (tenant, audit_id))
        return [appeal_from_row(row) for row in rows]

    def close(self) -> None:
        self._db.close()
