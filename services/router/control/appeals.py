"""Appeals of decisions (issue 40; EU DSA Article 20, internal complaint handling), plain Python: what an
appeal is, the checks on what a platform submits, and the review task it becomes.

A platform whose user contests a decision submits the appeal (PolicyAdmin SubmitAppeal): the decision's
audit id, who appeals (an opaque id of the platform's), and what they say. The appeal is stored with the
tenant's labels (services/router/control/label_store.py, labels_postgres.py) and becomes a review task
(reason "appeal", task id `appeal:<appeal id>`, so it never merges with the decision's own REVIEW task).
A reviewer's outcome (ResolveAppeal): "upheld" (the decision stands) or "reversed" (it is overturned), with
who decided, when and a note; an appeal is resolved once. The decision's statement of reasons lists its
appeals (services/router/control/reasons.py).

Example::

    appeal = new_appeal("acme", record, appellant="user-81", statement="this was a quote, not my words", now=time.time())
    resolved = resolve(appeal, "reversed", reviewer="rev-7", note="counter-speech", now=time.time())
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from typing import Sequence

from services.common.errors import FailedPreconditionError, InvalidRequestError, LimitExceededError
from services.router.control.audit import AuditRecord

__all__ = ["APPEAL_COLUMNS", "APPEAL_TASK_PREFIX", "MAX_APPEALS_PER_TENANT", "MAX_NOTE_CHARS", "MAX_STATEMENT_CHARS",
           "MAX_APPEALS_PER_DECISION", "OUTCOMES", "Appeal", "already_resolved", "appeal_from_row", "appeal_row", "appeal_task_id", "check_appeal_id", "check_appeal_room",
           "new_appeal", "resolve"]

#: What a reviewer may decide of an appeal.
OUTCOMES = ("upheld", "reversed")
MAX_STATEMENT_CHARS = 5000
MAX_NOTE_CHARS = 2000
MAX_ID_CHARS = 128
#: Appeals a tenant may hold (open and resolved); beyond, SubmitAppeal is refused (RESOURCE_EXHAUSTED).
MAX_APPEALS_PER_TENANT = 1_000_000
#: Appeals one decision may have (open and resolved): a statement of reasons lists them all.
MAX_APPEALS_PER_DECISION = 10
#: An appeal's review task id: this + the appeal id.
APPEAL_TASK_PREFIX = "appeal:"


@dataclass(frozen=True)
class Appeal:
    """One appeal of one decision. `status` is "open", or the outcome once resolved."""

    appeal_id: str
    tenant: str
    audit_id: str
    item_id: str
    appellant: str
    statement: str
    submitted_at: float
    status: str = "open"
    reviewer: str = ""
    note: str = ""
    resolved_at: float = 0.0


def _printable(field: str, value: str, limit: int, *, required: bool = False, lines: bool = False) -> str:
    """`value` checked (InvalidRequestError naming `field`): an id is one line of printable characters;
    with `lines`, a text may hold line breaks and tabs (Windows line breaks become \\n)."""
    if lines:
        value = value.replace("\r\n", "\n")
    if required and not value.strip():
        raise InvalidRequestError(f"{field}: required")
    if len(value) > limit:
        raise InvalidRequestError(f"{field}: {len(value)} characters, at most {limit}")
    if not (value.replace("\n", " ").replace("\t", " ") if lines else value).isprintable():
        raise InvalidRequestError(f"{field}: printable characters only" + ("" if lines else " on one line"))
    return value


def new_appeal(tenant: str, record: AuditRecord, *, appellant: str, statement: str, now: float) -> Appeal:
    """A new open appeal of `record` (the decision, already found for `tenant`). InvalidRequestError naming
    the field for an appellant or statement that cannot be stored."""
    _printable("appellant", appellant, MAX_ID_CHARS, required=True)
    statement = _printable("statement", statement, MAX_STATEMENT_CHARS, lines=True)
    return Appeal(uuid.uuid4().hex, tenant, record.audit_id, record.item_id, appellant, statement, now)


def resolve(appeal: Appeal, outcome: str, *, reviewer: str, note: str, now: float) -> Appeal:
    """`appeal` resolved with `outcome` ("upheld" or "reversed"). InvalidRequestError for an unknown outcome
    or a bad field; FailedPreconditionError for an appeal already resolved (its outcome stands)."""
    if outcome not in OUTCOMES:
        raise InvalidRequestError(f"outcome: {outcome!r} is not one of {', '.join(OUTCOMES)}")
    _printable("reviewer", reviewer, MAX_ID_CHARS, required=True)
    note = _printable("note", note, MAX_NOTE_CHARS, lines=True)
    if appeal.status != "open":
        raise already_resolved(appeal)
    return replace(appeal, status=outcome, reviewer=reviewer, note=note, resolved_at=now)


def already_resolved(appeal: Appeal) -> FailedPreconditionError:
    """The error for resolving `appeal` again."""
    return FailedPreconditionError(f"appeal_id: appeal {appeal.appeal_id!r} was already resolved ({appeal.status} by "
                                   f"{appeal.reviewer}); its outcome stands")


#: An appeal's columns, in the order `appeal_row` gives them and `appeal_from_row` reads them (both stores).
APPEAL_COLUMNS = ("appeal_id", "tenant", "audit_id", "item_id", "appellant", "statement", "submitted_at", "status",
                  "reviewer", "note", "resolved_at")


def appeal_row(appeal: Appeal) -> tuple[str | float, ...]:
    """`appeal` as a row of `APPEAL_COLUMNS`."""
    return (appeal.appeal_id, appeal.tenant, appeal.audit_id, appeal.item_id, appeal.appellant, appeal.statement,
            appeal.submitted_at, appeal.status, appeal.reviewer, appeal.note, appeal.resolved_at)


def appeal_from_row(row: Sequence[object]) -> Appeal:
    """An appeal from a row of `APPEAL_COLUMNS`."""
    return Appeal(str(row[0]), str(row[1]), str(row[2]), str(row[3]), str(row[4]), str(row[5]), float(str(row[6])),
                  str(row[7]), str(row[8]), str(row[9]), float(str(row[10])))


def check_appeal_room(appeal: Appeal, held: int, of_decision: int) -> None:
    """LimitExceededError when `appeal`'s tenant already holds `MAX_APPEALS_PER_TENANT` appeals, or its
    decision `MAX_APPEALS_PER_DECISION`."""
    if of_decision >= MAX_APPEALS_PER_DECISION:
        raise LimitExceededError(f"audit_id: decision {appeal.audit_id!r} has {of_decision} appeals, the most one decision "
                                 f"may have; resolve them and answer the appellant instead")
    if held >= MAX_APPEALS_PER_TENANT:
        raise LimitExceededError(f"tenant {appeal.tenant!r} holds {held} appeals, the limit")


def check_appeal_id(appeal_id: str) -> None:
    """InvalidRequestError for a missing or malformed appeal id."""
    if not appeal_id or len(appeal_id) > MAX_ID_CHARS or not appeal_id.isprintable():
        raise InvalidRequestError("appeal_id: required; the id SubmitAppeal returned")


def appeal_task_id(appeal_id: str) -> str:
    """The review task id of appeal `appeal_id`."""
    return APPEAL_TASK_PREFIX + appeal_id
