"""The statement of reasons for one decision (EU Digital Services Act, Article 17), built from what the mesh
already keeps: the decision's audit record and its appeals (plain Python; the admin API's
GetStatementOfReasons serves it).

Article 17 asks a platform that restricts content to tell the person concerned: what was restricted and
how; the facts and circumstances relied on; whether automated means were used, in detecting and in
deciding; the ground (here contractual: the platform's terms as its moderation policy states them); and the
redress open to them. A statement here carries each of those as data, for the platform to render:
- `restriction`: "removed" (BLOCK), "held for review" (REVIEW) or "none" (ALLOW);
- `grounds`: the categories whose action was not ALLOW, each with its score, the policy rule and the kind
  that decided it; `policy_name` and `policy_version` name the policy (the tenant's terms);
- `facts`: the evidence references of the audit record (spans, terms, OCR lines, image scores, bank
  matches; content only where the policy keeps it);
- `automated_detection` is always true (the mesh detected; `degraded` says when a stage was skipped or failed,
  so that the decision was taken without all its signals, e.g. a fail-closed REVIEW); `automated_decision`
  is false once a reviewer resolved an appeal of this decision (`reviewed_by`, `reviewed_at`: the latest
  such reviewer and time; the outcome is in `appeals`). A reviewer's label is not counted: labels belong to
  an item, not to one decision, and their time is the caller's;
- `redress`: where the decision can be contested (`DEFAULT_REDRESS` unless the caller gives its own), and
  `appeals`: the decision's appeals, open or resolved (services/router/control/appeals.py).

Example::

    statement = statement_of_reasons(record)
    statement.restriction, statement.automated_decision   # ('removed', True)
"""

from __future__ import annotations

from dataclasses import dataclass

from services.router.control.appeals import Appeal
from services.router.control.audit import AuditCategory, AuditRecord
from services.router.fusion import Evidence

__all__ = ["DEFAULT_REDRESS", "RESTRICTIONS", "StatementOfReasons", "statement_of_reasons"]

#: What a decision restricts, by decision.
RESTRICTIONS = {"block": "removed", "review": "held for review", "allow": "none"}
#: The redress a statement names when the platform gives none of its own.
DEFAULT_REDRESS = ("internal complaint handling: appeal the decision through the platform's appeal process; "
                   "out-of-court dispute settlement (DSA Article 21); judicial redress")


@dataclass(frozen=True)
class StatementOfReasons:
    """One decision's statement of reasons (module docstring)."""

    audit_id: str
    item_id: str
    decided_at: float
    decision: str
    restriction: str
    policy_name: str
    policy_version: str
    grounds: tuple[AuditCategory, ...]
    facts: tuple[Evidence, ...]
    models: tuple[tuple[str, str], ...]
    automated_detection: bool
    automated_decision: bool
    reviewed_by: str
    reviewed_at: float
    redress: str
    appeals: tuple[Appeal, ...] = ()
    degraded: bool = False


def statement_of_reasons(record: AuditRecord, *, appeals: tuple[Appeal, ...] = (), redress: str = "") -> StatementOfReasons:
    """The statement for `record`, with `appeals` (the decision's, oldest first) and the tenant's `redress`
    ("" = `DEFAULT_REDRESS`; see the module docstring)."""
    resolved = [appeal for appeal in appeals if appeal.status != "open"]
    latest = max(resolved, key=lambda appeal: appeal.resolved_at) if resolved else None
    return StatementOfReasons(
        audit_id=record.audit_id, item_id=record.item_id, decided_at=record.time, decision=record.decision,
        restriction=RESTRICTIONS.get(record.decision, record.decision),
        policy_name=record.policy_name, policy_version=record.policy_version,
        grounds=tuple(c for c in record.categories if c.action != "allow"), facts=record.evidence,
        models=record.models, automated_detection=True, automated_decision=latest is None,
        reviewed_by=latest.reviewer if latest is not None else "",
        reviewed_at=latest.resolved_at if latest is not None else 0.0, redress=redress or DEFAULT_REDRESS, appeals=appeals,
        degraded=record.degraded)
