"""A reviewer's label that names the review task it answers instead of carrying the text (issue 40), plain
Python: the item's text and id come from the task's decision.

A review tool that consumed a task (StreamReviewTasks) knows the task id, not always the content (the
platform holds it). When the decision's policy kept content (`audit.include_content`), its audit record has
the item's text parts: SubmitLabels with `task_id` and no text labels that text. A task id is the
decision's audit id, or `appeal:<appeal id>` for an appeal's task (whose decision is the one appealed:
`decision_id` resolves it). Where the record kept no content, or is past the audit log's retention, the
label cannot be stored without the text: InvalidRequestError says so, naming the item.

Example::

    label = label_for_task(Label("", "", {"harassment": 0}, "rev-7"), record, "items[0]")
    label.text, label.item_id   # the decision's kept text, its item id
"""

from __future__ import annotations

from dataclasses import replace

from services.common.errors import InvalidRequestError
from services.router.control.appeals import APPEAL_TASK_PREFIX
from services.router.control.audit import AuditRecord
from services.router.control.label_store import MAX_ID_CHARS, Label

__all__ = ["is_appeal_task", "label_for_task"]


def is_appeal_task(task_id: str) -> bool:
    """Whether `task_id` is an appeal's task (its decision is the appeal's, not the id itself)."""
    return task_id.startswith(APPEAL_TASK_PREFIX)


def label_for_task(item: Label, record: AuditRecord | None, task_id: str, where: str) -> Label:
    """`item` (no text) with the text and, when it has none, the item id of the decision `record` (the task's;
    None when there is none for the tenant or it is past retention). InvalidRequestError naming `where` when
    the decision kept no content to label."""
    if not task_id or len(task_id) > MAX_ID_CHARS + len(APPEAL_TASK_PREFIX) or not task_id.isprintable():
        raise InvalidRequestError(f"{where}.task_id: a review task's id (ReviewTask.task_id) is required without text")
    if record is None:
        raise InvalidRequestError(f"{where}.task_id: no decision of task {task_id!r} is kept for this tenant (another "
                                  f"tenant's, or past the audit log's retention); send the item's text")
    if not record.content:
        raise InvalidRequestError(f"{where}.text: the decision of task {task_id!r} kept no content (its policy's "
                                  f"audit.include_content is off); send the item's text")
    item_id = item.item_id or record.item_id or f"audit:{record.audit_id}"
    return replace(item, text="\n".join(record.content), item_id=item_id)
