"""What a resolved appeal teaches the tenant's classifiers (issue 40), plain Python: the reviewer's outcome
as a label of the appealed item.

A reviewer who resolves an appeal has looked at the item again. When ResolveAppeal carries the item's text
(the mesh keeps no content by default; a decision recorded under the policy's `audit.include_content` gives
its kept text parts instead), the outcome is stored as the item's label in the tenant's label store, as
SubmitLabels would store it (reviewer and time from the resolution; the decision's item id, or
`audit:<audit id>` where the request named none or one a label cannot carry), so `auditmesh classifier train
--from-router` learns from it:

- labels the request names are taken as given;
- an upheld decision says the item is what decided it: each category whose action was the decision's (BLOCK
  of a blocked item, REVIEW of one held for review) because of the item's text (a span of a text part
  cited as evidence: not an image's scores, OCR lines or a bank match) is 1; categories that only went to
  REVIEW beside a BLOCK were decided by no one and are left out;
- a reversal says the decision was wrong, not what the item is (a quote, counter-speech, an action too
  severe for what is still profanity): a request with text must name the labels.

The label is merged into the item's earlier label of the same text (categories it names replace theirs, the
others stay; an earlier label of another text is replaced), and only when the resolution is newer than that
label: a later reviewer's label stands.

No text, no kept content: no label (the resolution is stored all the same).

Example::

    label = resolution_label(upheld, record, text="you are a total idiot", labels={}, existing=None)
    label.labels    # {'profanity': 1} for an upheld BLOCK of profanity
"""

from __future__ import annotations

from typing import Mapping

from services.common.errors import InvalidRequestError
from services.router.control.appeals import Appeal
from services.router.control.audit import AuditRecord
from services.router.control.label_store import MAX_ID_CHARS, Label, check_item
from services.router.fusion import TextSpanEvidence
from services.trainer.examples import MAX_TEXT_CHARS, ExamplesError, check_category

__all__ = ["derived_labels", "label_item_id", "resolution_label"]


def derived_labels(record: AuditRecord, outcome: str) -> dict[str, int]:
    """The labels an `outcome` ("upheld" or "reversed") of `record`'s decision says of the item's text (module
    docstring): for "upheld", each deciding category from the item's text as 1; for "reversed", none."""
    if outcome != "upheld":
        return {}
    from_text = {e.category for e in record.evidence if isinstance(e, TextSpanEvidence) and e.ocr_line < 0}
    return {c.category: 1 for c in record.categories
            if c.action == record.decision and c.action != "allow" and c.category in from_text and _labellable(c.category)}


def resolution_label(appeal: Appeal, record: AuditRecord | None, *, text: str, labels: Mapping[str, bool]) -> Label | None:
    """The label `appeal` (resolved) gives its item (module docstring), before it is merged into the item's
    label (`label_store.merged_label`, in the store's own transaction), or None: no text to store. `record` is
    the decision (None once past the audit log's retention). InvalidRequestError naming the request's field
    (`text`, `labels...`) for a label that cannot be stored, checked as SubmitLabels checks."""
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
            if appeal.status == "reversed":
                why = "a reversal says the decision was wrong, not what the item is"
            elif record is None:
                why = "the decision's audit record is no longer kept"
            else:
                why = "the decision acted on no category because of the item's text"
            raise InvalidRequestError(f"labels: {why}; name the item's labels (e.g. harassment=0 profanity=1)")
    label = Label(label_item_id(appeal), text, values, appeal.reviewer, appeal.resolved_at)
    check_item(label)
    return label


def label_item_id(appeal: Appeal) -> str:
    """The item id `appeal`'s label is stored under: the decision's item id, or `audit:<audit id>` for a
    decision whose request named none, or one a label cannot carry (over 128 characters, not printable)."""
    item = appeal.item_id
    return item if 0 < len(item) <= MAX_ID_CHARS and item.isprintable() else f"audit:{appeal.audit_id}"


def _labellable(category: str) -> bool:
    try:
        check_category(category)
    except ExamplesError:
        return False
    return True
