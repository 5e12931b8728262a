"""What a resolved appeal teaches the tenant's classifiers (issue 40), plain Python: the reviewer's outcome
as a label of the appealed item.

A reviewer who resolves an appeal has looked at the item again: the label a platform most wants its
classifiers to learn from. When ResolveAppeal carries the item's text (the mesh keeps no content by default;
a decision recorded under the policy's `audit.include_content` gives its kept text parts instead), the
outcome is stored as the item's label in the tenant's label store, as SubmitLabels would store it (item id,
reviewer and time from the resolution; a decision whose request named no item is stored as
`audit:<audit id>`), so `auditmesh classifier train --from-router` learns from it:

- labels the request names are taken as given (the reviewer may know more than the outcome says: a
  reversed BLOCK for harassment that is still profanity);
- otherwise they come from the decision: each category it acted on (REVIEW or BLOCK) because of the item's
  text (a span of a text part cited as evidence: not an image's scores, OCR lines or a bank match) is 1
  when the decision was upheld and 0 when it was reversed;
- a decision that acted on no category because of its text (an ALLOW appealed by someone who reported the
  item, or an image decision) has no labels to derive: a request with text must name them.

No text, no kept content: no label (the resolution is stored all the same).

Example::

    label = resolution_label(resolved, record, text="I quoted it to report it: ...", labels={})
    label.labels    # {'harassment': 0} for a reversed BLOCK of harassment
"""

from __future__ import annotations

from typing import Mapping

from services.common.errors import InvalidRequestError
from services.router.control.appeals import Appeal
from services.router.control.audit import AuditRecord
from services.router.control.label_store import Label, check_item
from services.router.fusion import TextSpanEvidence
from services.trainer.examples import MAX_TEXT_CHARS, ExamplesError, check_category

__all__ = ["derived_labels", "label_item_id", "resolution_label"]


def derived_labels(record: AuditRecord, outcome: str) -> dict[str, int]:
    """The labels an `outcome` ("upheld" or "reversed") of `record`'s decision says of the item's text: each
    category it acted on because of its text parts (a span of the text, not of an image's OCR lines, cited as
    evidence) that a label can name, 1 when upheld, 0 when reversed."""
    value = 1 if outcome == "upheld" else 0
    from_text = {e.category for e in record.evidence if isinstance(e, TextSpanEvidence) and e.ocr_line < 0}
    return {c.category: value for c in record.categories
            if c.action != "allow" and c.category in from_text and _labellable(c.category)}


def resolution_label(appeal: Appeal, record: AuditRecord | None, *, text: str,
                     labels: Mapping[str, bool]) -> Label | None:
    """The label `appeal` (resolved) gives its item (module docstring), or None without text to store.
    `record` is the decision (None once past the audit log's retention). InvalidRequestError naming the
    request's field (`text`, `labels...`) for a label that cannot be stored, checked as SubmitLabels checks."""
    if appeal.status not in ("upheld", "reversed"):
        raise ValueError(f"appeal {appeal.appeal_id!r} is {appeal.status}, not resolved")
    if not text.strip() and labels:
        raise InvalidRequestError("text: required with labels (the mesh keeps no content by default); send the item's text")
    asked = bool(text.strip())
    if not asked and record is not None and record.content:
        text = "\n".join(record.content)
        if len(text) > MAX_TEXT_CHARS:  # longer than a label may be: the caller asked for none, so none
            return None
    if not text.strip():
        return None
    if labels:
        values = {category: int(value) for category, value in labels.items()}
    else:
        values = derived_labels(record, appeal.status) if record is not None else {}
        if not values:
            if not asked:  # only kept content: the caller asked for no label, so none is stored
                return None
            why = ("the decision's audit record is no longer kept" if record is None
                   else "the decision acted on no category a label can name")
            raise InvalidRequestError(f"labels: {why}; name the item's labels (e.g. harassment=false)")
    label = Label(label_item_id(appeal), text, values, appeal.reviewer, appeal.resolved_at)
    check_item(label)
    return label


def label_item_id(appeal: Appeal) -> str:
    """The item id `appeal`'s label is stored under: the decision's item id, or `audit:<audit id>` for a
    decision whose request named no item."""
    return appeal.item_id or f"audit:{appeal.audit_id}"


def _labellable(category: str) -> bool:
    try:
        check_category(category)
    except ExamplesError:
        return False
    return True
