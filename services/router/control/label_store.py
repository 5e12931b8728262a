"""Reviewers' labels per tenant (issue 40): what a platform's reviewers decided about its items, the
training data of its own classifiers (docs/tenant-classifiers.md). The admin API's SubmitLabels and
ExportLabels read and write it; `auditmesh labels import` and `classifier train --from-router` use those.

One SQLite file (`lifecycle.labels_path`; default `labels.sqlite` beside the policy store), WAL, created
0600 (services/router/control/sqlite_wal.py). One row per (tenant, item id): a later label of the same item
replaces the earlier one, and the row says whose and when. Every statement names one tenant in its SQL
condition: a tenant never reads, counts or replaces another tenant's labels, and its page tokens are its
own item ids (nothing about other tenants' volume shows through).

Bounds: `check_items` refuses a malformed item before anything is stored (the message names
`items[i].field`); a tenant holds at most `max_per_tenant` items (LimitExceededError beyond, nothing of
that call stored).

Example::

    store = LabelStore(Path("var/labels.sqlite"))
    store.submit("acme", [Label("m-1", "free airdrop, connect your wallet", {"custom.crypto_scam": 1}, "rev-7", 0.0)])
    labels, token = store.page("acme", limit=500)
"""

from __future__ import annotations

import base64
import json
import math
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Protocol, Sequence

from services.common.errors import InvalidRequestError, LimitExceededError
from services.router.control.appeals import APPEAL_COLUMNS, Appeal, check_appeal_room, already_resolved, appeal_from_row, \
    appeal_row
from services.router.control.sqlite_wal import open_shared, write_transaction
from services.trainer.examples import MAX_EXAMPLES, MAX_TEXT_CHARS, ExamplesError, check_category

__all__ = ["Label", "LabelRepository", "LabelStore", "MAX_DELETE", "MAX_ITEMS_PER_CALL", "MAX_PAGE", "Submitted",
           "SELECT_LABELS", "UPSERT_LABEL", "check_delete", "check_item", "check_items", "label_row", "merged_label", "one_label", "check_page_limit", "check_room", "decode_token", "encode_token"]

#: Items one SubmitLabels call may carry.
MAX_ITEMS_PER_CALL = 1000
#: Item ids of one DeleteLabels call at most.
MAX_DELETE = 1000
#: Items one ExportLabels page may return.
MAX_PAGE = 1000
DEFAULT_PAGE = 500
MAX_ID_CHARS = 128
#: The latest `labelled_at` accepted (year 2100).
MAX_TIME = 4_102_444_800.0
#: Text bytes one ExportLabels page carries at most (well under gRPC's message limits).
MAX_PAGE_BYTES = 8 * 1024 * 1024
MAX_CATEGORIES = 32

_SCHEMA = """
CREATE TABLE IF NOT EXISTS labels (
    tenant TEXT NOT NULL, item_id TEXT NOT NULL, text TEXT NOT NULL, labels TEXT NOT NULL,
    reviewer TEXT NOT NULL, labelled_at REAL NOT NULL, PRIMARY KEY (tenant, item_id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS appeals (
    appeal_id TEXT NOT NULL PRIMARY KEY, tenant TEXT NOT NULL, audit_id TEXT NOT NULL, item_id TEXT NOT NULL,
    appellant TEXT NOT NULL, statement TEXT NOT NULL, submitted_at REAL NOT NULL, status TEXT NOT NULL,
    reviewer TEXT NOT NULL, note TEXT NOT NULL, resolved_at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS appeals_by_decision ON appeals (tenant, audit_id);
"""
_APPEAL_SELECT = f"SELECT {', '.join(APPEAL_COLUMNS)} FROM appeals"


@dataclass(frozen=True)
class Label:
    """One reviewer's labels of one item: category -> 1 (is) or 0 (is not)."""

    item_id: str
    text: str
    labels: Mapping[str, int]
    reviewer: str = ""
    labelled_at: float = 0.0


@dataclass(frozen=True)
class Submitted:
    added: int
    replaced: int
    tenant_total: int


def check_items(items: Sequence[Label]) -> None:
    """InvalidRequestError naming `items[i].field` for the first item that cannot be stored."""
    if len(items) > MAX_ITEMS_PER_CALL:
        raise InvalidRequestError(f"items: {len(items)} items, at most {MAX_ITEMS_PER_CALL} per call; split them")
    for index, item in enumerate(items):
        check_item(item, f"items[{index}].")


def check_item(item: Label, where: str = "") -> None:
    """InvalidRequestError naming `where` + the field (e.g. `items[3].text`) when `item` cannot be stored."""
    if not 1 <= len(item.item_id) <= MAX_ID_CHARS or not item.item_id.isprintable():
        raise InvalidRequestError(f"{where}item_id: 1-{MAX_ID_CHARS} printable characters are required")
    if not item.text.strip():
        raise InvalidRequestError(f"{where}text: the item's text is required")
    if len(item.text) > MAX_TEXT_CHARS:
        raise InvalidRequestError(f"{where}text: {len(item.text)} characters, at most {MAX_TEXT_CHARS}")
    if not 1 <= len(item.labels) <= MAX_CATEGORIES:
        raise InvalidRequestError(f"{where}labels: 1-{MAX_CATEGORIES} categories are required")
    for category, value in item.labels.items():
        try:
            check_category(category)
        except ExamplesError as error:
            raise InvalidRequestError(f"{where}labels.{category}: {error}") from None
        if value not in (0, 1):
            raise InvalidRequestError(f"{where}labels.{category}: must be 1 or 0")
    if len(item.reviewer) > MAX_ID_CHARS or not item.reviewer.isprintable():
        raise InvalidRequestError(f"{where}reviewer: at most {MAX_ID_CHARS} printable characters")
    if not math.isfinite(item.labelled_at) or not 0 <= item.labelled_at <= MAX_TIME:
        raise InvalidRequestError(f"{where}labelled_at: seconds since the Unix epoch (0 = now), got {item.labelled_at}")


class LabelRepository(Protocol):
    """What the admin API needs of a label store: this SQLite one, or PostgreSQL's shared by every router
    replica (services/router/control/labels_postgres.py). Blocking; thread-safe."""

    max_per_tenant: int

    def submit(self, tenant: str, items: Sequence[Label]) -> Submitted: ...

    def page(self, tenant: str, *, limit: int = DEFAULT_PAGE, page_token: str = "") -> tuple[list[Label], str]: ...

    def count(self, tenant: str) -> int: ...

    def label_of(self, tenant: str, item_id: str) -> Label | None: ...

    def merge(self, tenant: str, label: Label) -> bool: ...

    def delete(self, tenant: str, item_ids: Sequence[str]) -> int: ...

    def purge_tenant(self, tenant: str) -> tuple[int, int]: ...

    def add_appeal(self, appeal: Appeal) -> None: ...

    def get_appeal(self, tenant: str, appeal_id: str) -> Appeal | None: ...

    def save_resolution(self, appeal: Appeal) -> None: ...

    def appeals_of(self, tenant: str, audit_id: str) -> list[Appeal]: ...

    def close(self) -> None: ...


def check_delete(item_ids: Sequence[str]) -> None:
    """InvalidRequestError for an empty or too long list of item ids to delete."""
    if not item_ids:
        raise InvalidRequestError("item_ids: name at least one item whose labels to delete")
    if len(item_ids) > MAX_DELETE:
        raise InvalidRequestError(f"item_ids: at most {MAX_DELETE} per call, got {len(item_ids)}")


def check_page_limit(limit: int) -> None:
    """InvalidRequestError for a page size outside 1..MAX_PAGE."""
    if not 1 <= limit <= MAX_PAGE:
        raise InvalidRequestError(f"limit: must be 1..{MAX_PAGE}, got {limit}")


def check_room(tenant: str, total: int, added: int, max_per_tenant: int) -> None:
    """LimitExceededError when `added` new items would take `tenant` past its bound."""
    if total + added > max_per_tenant:
        raise LimitExceededError(f"tenant {tenant!r} holds {total} labelled items; {added} more would pass "
                                 f"the limit of {max_per_tenant}")


def merged_label(existing: Label | None, label: Label) -> Label | None:
    """`label` merged into the item's label now (`existing`): the categories it names replace theirs and the
    others stay, when both are of the same text; `label` alone when `existing` is of another text (its labels
    were not of this one) or there is none; None when `existing` is newer (a later reviewer's label stands).

    Example::

        >>> merged_label(Label("m", "t", {"hate": 1}, "r1", 1.0), Label("m", "t", {"spam": 0}, "r2", 2.0)).labels
        {'hate': 1, 'spam': 0}
    """
    if existing is None:
        return label
    if existing.labelled_at > label.labelled_at:
        return None
    if existing.text != label.text:
        return label
    return Label(label.item_id, label.text, {**existing.labels, **label.labels}, label.reviewer, label.labelled_at)


#: A label row's columns, in the order `page_of` and `one_label` read them (both stores).
SELECT_LABELS = "SELECT item_id, text, labels, reviewer, labelled_at FROM labels"
#: A label written or replaced, from `label_row` (SQLite's placeholders; PostgreSQL's store swaps them).
UPSERT_LABEL = ("INSERT INTO labels (tenant, item_id, text, labels, reviewer, labelled_at) VALUES (?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (tenant, item_id) DO UPDATE SET text = excluded.text, labels = excluded.labels, "
                "reviewer = excluded.reviewer, labelled_at = excluded.labelled_at")


def label_row(tenant: str, label: Label, now: float) -> tuple[str, str, str, str, str, float]:
    """`label` of `tenant` as `UPSERT_LABEL`'s values (no time: `now`)."""
    return tenant, label.item_id, label.text, labels_json(label.labels), label.reviewer, label.labelled_at or now


def one_label(rows: Sequence[tuple[str, str, str, str, float]]) -> Label | None:
    """The label of the one row `SELECT_LABELS` found for an item, or None."""
    return page_of(rows, 1)[0][0] if rows else None


def labels_json(labels: Mapping[str, int]) -> str:
    """A label set as stored: compact JSON, categories sorted."""
    return json.dumps(dict(sorted(labels.items())), separators=(",", ":"))


def page_of(rows: Sequence[tuple[str, str, str, str, float]], limit: int) -> tuple[list[Label], str]:
    """Labels from up to `limit + 1` rows (item_id, text, labels JSON, reviewer, labelled_at) in item-id
    order: at most `limit` and about MAX_PAGE_BYTES of text, and the next page's token."""
    labels: list[Label] = []
    size = 0
    for item_id, text, raw, reviewer, at in rows[:limit]:
        size += len(text.encode("utf-8"))
        if labels and size > MAX_PAGE_BYTES:  # a page of long texts ends early: the token goes on from here
            return labels, encode_token(labels[-1].item_id)
        labels.append(Label(item_id, text, json.loads(raw), reviewer, at))
    return labels, (encode_token(labels[-1].item_id) if len(rows) > limit else "")


class LabelStore:
    """See the module docstring. Thread-safe (one connection, one lock): the admin API calls it from
    worker threads."""

    def __init__(self, path: Path, *, max_per_tenant: int = MAX_EXAMPLES,
                 clock: Callable[[], float] = time.time) -> None:
        self.path = path
        self.max_per_tenant = max_per_tenant
        self._clock = clock
        self._lock = threading.Lock()
        self._db = open_shared(path)
        self._db.executescript(_SCHEMA)

    def submit(self, tenant: str, items: Sequence[Label]) -> Submitted:
        """Store `items` for `tenant` in one transaction (all or nothing): `check_items` first, then the
        tenant's bound (LimitExceededError)."""
        check_items(items)
        now = self._clock()
        latest = {item.item_id: item for item in items}  # the same id twice in one call: the last counts
        with self._lock, write_transaction(self._db):
            known = self._existing(tenant, list(latest))
            total = self.count_locked(tenant)
            added = len(latest) - len(known)
            check_room(tenant, total, added, self.max_per_tenant)
            self._db.executemany(UPSERT_LABEL, [label_row(tenant, item, now) for item in latest.values()])
        return Submitted(added, len(known), total + added)

    def page(self, tenant: str, *, limit: int = DEFAULT_PAGE, page_token: str = "") -> tuple[list[Label], str]:
        """`tenant`'s labels in item-id order after `page_token`, at most `limit` (1..MAX_PAGE) and about
        `MAX_PAGE_BYTES` of text, and the next token ("" at the end). InvalidRequestError for a bad limit or
        token."""
        check_page_limit(limit)
        after = decode_token(page_token)
        with self._lock:
            rows = self._db.execute(
                f"{SELECT_LABELS} WHERE tenant = ? AND item_id > ? "
                "ORDER BY item_id LIMIT ?", (tenant, after, limit + 1)).fetchall()
        return page_of(rows, limit)

    def count(self, tenant: str) -> int:
        """How many items `tenant` has labels for."""
        with self._lock:
            return self.count_locked(tenant)

    def merge(self, tenant: str, label: Label) -> bool:
        """Store `label` merged into the item's label (`merged_label`), read and written in one transaction (two
        reviewers at once lose nothing); False when the item's label is newer (nothing stored). `check_item`
        first; LimitExceededError for a new item past the tenant's bound."""
        check_item(label)
        with self._lock, write_transaction(self._db):
            existing = one_label(self._db.execute(f"{SELECT_LABELS} WHERE tenant = ? AND item_id = ?",
                                                  (tenant, label.item_id)).fetchall())
            result = merged_label(existing, label)
            if result is None:
                return False
            if existing is None:
                check_room(tenant, self.count_locked(tenant), 1, self.max_per_tenant)
            self._db.execute(UPSERT_LABEL, label_row(tenant, result, self._clock()))
        return True

    def label_of(self, tenant: str, item_id: str) -> Label | None:
        """`tenant`'s label of `item_id`, or None."""
        with self._lock:
            rows = self._db.execute(f"{SELECT_LABELS} WHERE tenant = ? AND item_id = ?", (tenant, item_id)).fetchall()
        return one_label(rows)

    def delete(self, tenant: str, item_ids: Sequence[str]) -> int:
        """Delete `tenant`'s labels of `item_ids` (an erasure request, a label given by mistake), and the appeals
        of those items, in one transaction; how many labels there were. Another tenant's items of the same ids
        are untouched."""
        check_delete(item_ids)
        unique = list(dict.fromkeys(item_ids))
        with self._lock, write_transaction(self._db):
            # the items' appeals go too: they hold what a user wrote
            self._db.executemany("DELETE FROM appeals WHERE tenant = ? AND item_id = ?", [(tenant, i) for i in unique])
            return sum(self._db.execute("DELETE FROM labels WHERE tenant = ? AND item_id = ?", (tenant, item_id)).rowcount
                       for item_id in unique)

    def purge_tenant(self, tenant: str) -> tuple[int, int]:
        """Delete every label and appeal of `tenant` (a tenant removed from the mesh; PolicyAdmin PurgeTenant),
        in one transaction: (labels, appeals) deleted."""
        with self._lock, write_transaction(self._db):
            appeals = int(self._db.execute("DELETE FROM appeals WHERE tenant = ?", (tenant,)).rowcount)
            return int(self._db.execute("DELETE FROM labels WHERE tenant = ?", (tenant,)).rowcount), appeals

    def add_appeal(self, appeal: Appeal) -> None:
        """Store a new appeal (services/router/control/appeals.py); LimitExceededError when its tenant holds
        `MAX_APPEALS_PER_TENANT`."""
        with self._lock, write_transaction(self._db):
            held = int(self._db.execute("SELECT COUNT(*) FROM appeals WHERE tenant = ?", (appeal.tenant,)).fetchone()[0])
            of_decision = int(self._db.execute("SELECT COUNT(*) FROM appeals WHERE tenant = ? AND audit_id = ?",
                                               (appeal.tenant, appeal.audit_id)).fetchone()[0])
            check_appeal_room(appeal, held, of_decision)
            self._db.execute(f"INSERT INTO appeals ({', '.join(APPEAL_COLUMNS)}) VALUES ({', '.join('?' * len(APPEAL_COLUMNS))})",
                             appeal_row(appeal))

    def get_appeal(self, tenant: str, appeal_id: str) -> Appeal | None:
        """`tenant`'s appeal `appeal_id`, or None (none, or another tenant's)."""
        with self._lock:
            row = self._db.execute(f"{_APPEAL_SELECT} WHERE tenant = ? AND appeal_id = ?", (tenant, appeal_id)).fetchone()
        return appeal_from_row(row) if row else None

    def save_resolution(self, appeal: Appeal) -> None:
        """Record a resolved appeal's outcome, if it is still open (FailedPreconditionError when another call
        resolved it first: the first outcome stands)."""
        with self._lock, write_transaction(self._db):
            changed = self._db.execute(
                "UPDATE appeals SET status = ?, reviewer = ?, note = ?, resolved_at = ? WHERE tenant = ? AND appeal_id = ? "
                "AND status = 'open'", (appeal.status, appeal.reviewer, appeal.note, appeal.resolved_at, appeal.tenant,
                                        appeal.appeal_id)).rowcount
        if not changed:
            raise already_resolved(self.get_appeal(appeal.tenant, appeal.appeal_id) or appeal)

    def appeals_of(self, tenant: str, audit_id: str) -> list[Appeal]:
        """`tenant`'s appeals of decision `audit_id`, oldest first."""
        with self._lock:
            rows = self._db.execute(f"{_APPEAL_SELECT} WHERE tenant = ? AND audit_id = ? ORDER BY submitted_at, appeal_id",
                                    (tenant, audit_id)).fetchall()
        return [appeal_from_row(row) for row in rows]

    def count_locked(self, tenant: str) -> int:
        row = self._db.execute("SELECT COUNT(*) FROM labels WHERE tenant = ?", (tenant,)).fetchone()
        return int(row[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _existing(self, tenant: str, item_ids: list[str]) -> set[str]:
        found: set[str] = set()
        for start in range(0, len(item_ids), 500):  # SQLite's bound on variables per statement
            chunk = item_ids[start:start + 500]
            marks = ",".join("?" * len(chunk))
            found.update(row[0] for row in self._db.execute(
                f"SELECT item_id FROM labels WHERE tenant = ? AND item_id IN ({marks})", (tenant, *chunk)))
        return found


def encode_token(item_id: str) -> str:
    return base64.urlsafe_b64encode(item_id.encode("utf-8")).decode("ascii")


def decode_token(token: str) -> str:
    if not token:
        return ""
    try:
        return base64.b64decode(token.encode("ascii"), altchars=b"-_", validate=True).decode("utf-8")
    except (ValueError, UnicodeError):
        raise InvalidRequestError("page_token: not a token this API returned") from None
