"""A resolved appeal as the item's label (services/router/control/appeal_labels.py): plain Python."""

from __future__ import annotations

from dataclasses import replace

import pytest

from services.common.errors import InvalidRequestError
from services.router.control.appeal_labels import derived_labels, resolution_label
from services.router.control.appeals import Appeal, new_appeal, resolve
from services.router.control.audit import AuditCategory, AuditRecord
from services.router.fusion import ImageScoreEvidence, TextSpanEvidence
from tests.unit.router.control.test_audit import record_for


def resolved(outcome: str, *, include_content: bool = False, item: str = "m-1") -> tuple[Appeal, AuditRecord]:
    record = record_for("acme", item=item, include_content=include_content, at=1000.0)
    appeal = new_appeal("acme", record, appellant="user-81", statement="a quote", now=2000.0)
    return resolve(appeal, outcome, reviewer="rev-7", note="", now=2100.0), record


def test_the_outcome_labels_each_category_the_text_made_the_decision_act_on() -> None:
    reversed_, record = resolved("reversed")
    assert [(c.category, c.action) for c in record.categories] == [("profanity", "block")]
    label = resolution_label(reversed_, record, text="I was quoting him: you are a total idiot", labels={})
    assert label is not None
    assert (label.item_id, label.labels, label.reviewer, label.labelled_at) == ("m-1", {"profanity": 0}, "rev-7", 2100.0)
    upheld, record = resolved("upheld")
    assert derived_labels(record, upheld.status) == {"profanity": 1}


def test_named_labels_are_taken_as_given_and_checked_as_submit_labels_checks_them() -> None:
    reversed_, record = resolved("reversed")
    label = resolution_label(reversed_, record, text="the text", labels={"profanity": True, "custom.crypto_scam": False})
    assert label is not None and label.labels == {"profanity": 1, "custom.crypto_scam": 0}
    with pytest.raises(InvalidRequestError, match="^labels.nudity: unknown category 'nudity'"):
        resolution_label(reversed_, record, text="the text", labels={"nudity": True})
    with pytest.raises(InvalidRequestError, match="^text: 20001 characters, at most 20000"):
        resolution_label(reversed_, record, text="x" * 20_001, labels={})
    with pytest.raises(InvalidRequestError, match="^text: required with labels"):
        resolution_label(reversed_, record, text="", labels={"profanity": False})


def test_no_text_and_no_kept_content_store_no_label() -> None:
    reversed_, record = resolved("reversed")
    assert resolution_label(reversed_, record, text="  ", labels={}) is None


def test_kept_content_is_the_text_when_the_request_sends_none() -> None:
    reversed_, record = resolved("reversed", include_content=True)
    label = resolution_label(reversed_, record, text="", labels={})
    assert label is not None and (label.text, label.labels) == ("you are a total idiot", {"profanity": 0})
    # kept content longer than a label may be, or nothing to derive: no label, and no error for a field not sent
    long = replace(record, content=("x" * 20_001,))
    assert resolution_label(reversed_, long, text="", labels={}) is None
    allowed = replace(record, decision="allow", categories=(AuditCategory("profanity", 0.1, "allow", ""),))
    assert resolution_label(reversed_, allowed, text="", labels={}) is None


def test_nothing_to_derive_needs_named_labels_when_text_is_sent() -> None:
    reversed_, record = resolved("reversed")
    allowed = replace(record, decision="allow", categories=(AuditCategory("profanity", 0.1, "allow", ""),))
    with pytest.raises(InvalidRequestError, match="^labels: the decision acted on no category a label can name"):
        resolution_label(reversed_, allowed, text="the text", labels={})
    with pytest.raises(InvalidRequestError, match="^labels: the decision's audit record is no longer kept"):
        resolution_label(reversed_, None, text="the text", labels={})
    assert resolution_label(reversed_, None, text="the text", labels={"hate": False}) is not None


def test_an_image_decision_labels_nothing_of_the_text() -> None:
    reversed_, record = resolved("reversed")
    image = replace(record, categories=(AuditCategory("sexual", 0.97, "block", "categories.sexual.block_at"),),
                    evidence=(ImageScoreEvidence("sexual", 1, "nsfw", {"sexual": 0.97}),
                              TextSpanEvidence("sexual", 1, 0, 4, "", ocr_line=0)))  # an OCR line's span is the image's
    assert derived_labels(image, "reversed") == {}


def test_a_decision_with_no_item_id_is_labelled_by_its_audit_id() -> None:
    reversed_, record = resolved("reversed", item="")
    label = resolution_label(reversed_, record, text="the text", labels={})
    assert label is not None and label.item_id == f"audit:{record.audit_id}"
