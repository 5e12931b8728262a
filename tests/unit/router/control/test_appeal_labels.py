"""A resolved appeal as the item's label (services/router/control/appeal_labels.py): plain Python."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from services.common.errors import InvalidRequestError
from services.router.control.appeal_labels import derived_labels, label_item_id, resolution_label
from services.router.control.appeals import Appeal, new_appeal, resolve
from services.router.control.audit import AuditCategory, AuditRecord
from services.router.control.label_store import Label, LabelStore, merged_label
from services.router.fusion import ImageScoreEvidence, TextSpanEvidence
from tests.unit.router.control.test_audit import record_for


def resolved(outcome: str, *, include_content: bool = False, item: str = "m-1") -> tuple[Appeal, AuditRecord]:
    record = record_for("acme", item=item, include_content=include_content, at=1000.0)
    appeal = new_appeal("acme", record, appellant="user-81", statement="a quote", now=2000.0)
    return resolve(appeal, outcome, reviewer="rev-7", note="", now=2100.0), record


def test_an_upheld_decision_labels_what_decided_it_from_the_items_text() -> None:
    upheld, record = resolved("upheld")
    assert [(c.category, c.action) for c in record.categories] == [("profanity", "block")]
    label = resolution_label(upheld, record, text="you are a total idiot", labels={})
    assert label is not None
    assert (label.item_id, label.labels, label.reviewer, label.labelled_at) == ("m-1", {"profanity": 1}, "rev-7", 2100.0)
    # a category that only went to REVIEW beside the BLOCK was decided by no one: left out
    beside = replace(record, categories=(*record.categories, AuditCategory("spam", 0.6, "review", "categories.spam.review")),
                     evidence=(*record.evidence, TextSpanEvidence("spam", 0, 0, 4, "")))
    assert derived_labels(beside, "upheld") == {"profanity": 1}


def test_a_reversal_says_the_decision_was_wrong_not_what_the_item_is() -> None:
    reversed_, record = resolved("reversed")
    assert derived_labels(record, "reversed") == {}
    with pytest.raises(InvalidRequestError, match="^labels: a reversal says the decision was wrong, not what the item is; "
                                                  "name the item's labels"):
        resolution_label(reversed_, record, text="he called me a total idiot, look", labels={})
    named = resolution_label(reversed_, record, text="he called me a total idiot, look",
                             labels={"harassment": False, "profanity": True})
    assert named is not None and named.labels == {"harassment": 0, "profanity": 1}


def test_named_labels_are_checked_as_submit_labels_checks_them() -> None:
    reversed_, record = resolved("reversed")
    label = resolution_label(reversed_, record, text="the text", labels={"profanity": True, "custom.crypto_scam": False})
    assert label is not None and label.labels == {"profanity": 1, "custom.crypto_scam": 0}
    with pytest.raises(InvalidRequestError, match="^labels.nudity: unknown category 'nudity'"):
        resolution_label(reversed_, record, text="the text", labels={"nudity": True})
    with pytest.raises(InvalidRequestError, match="^text: 20001 characters, at most 20000"):
        resolution_label(reversed_, record, text="x" * 20_001, labels={"hate": False})
    with pytest.raises(InvalidRequestError, match="^text: required with labels"):
        resolution_label(reversed_, record, text="", labels={"profanity": False})


def test_no_text_and_no_kept_content_store_no_label() -> None:
    upheld, record = resolved("upheld")
    assert resolution_label(upheld, record, text="  ", labels={}) is None


def test_kept_content_is_the_text_when_the_request_sends_none() -> None:
    upheld, record = resolved("upheld", include_content=True)
    label = resolution_label(upheld, record, text="", labels={})
    assert label is not None and (label.text, label.labels) == ("you are a total idiot", {"profanity": 1})
    # kept content longer than a label may be, nothing to derive, or a reversal: no label, and no error for a
    # field not sent
    assert resolution_label(upheld, replace(record, content=("x" * 20_001,)), text="", labels={}) is None
    allowed = replace(record, decision="allow", categories=(AuditCategory("profanity", 0.1, "allow", ""),))
    assert resolution_label(upheld, allowed, text="", labels={}) is None
    reversed_, record = resolved("reversed", include_content=True)
    assert resolution_label(reversed_, record, text="", labels={}) is None


def test_nothing_to_derive_needs_named_labels_when_text_is_sent() -> None:
    upheld, record = resolved("upheld")
    allowed = replace(record, decision="allow", categories=(AuditCategory("profanity", 0.1, "allow", ""),))
    with pytest.raises(InvalidRequestError, match="^labels: the decision acted on no category because of the item's text"):
        resolution_label(upheld, allowed, text="the text", labels={})
    with pytest.raises(InvalidRequestError, match="^labels: the decision's audit record is no longer kept"):
        resolution_label(upheld, None, text="the text", labels={})
    assert resolution_label(upheld, None, text="the text", labels={"hate": False}) is not None


def test_an_image_decision_labels_nothing_of_the_text() -> None:
    _, record = resolved("upheld")
    image = replace(record, categories=(AuditCategory("sexual", 0.97, "block", "categories.sexual.block_at"),),
                    evidence=(ImageScoreEvidence("sexual", 1, "nsfw", {"sexual": 0.97}),
                              TextSpanEvidence("sexual", 1, 0, 4, "", ocr_line=0)))  # an OCR line's span is the image's
    assert derived_labels(image, "upheld") == {}


def test_the_label_merges_into_the_items_earlier_one_of_the_same_text_unless_that_one_is_newer(tmp_path: Path) -> None:
    upheld, record = resolved("upheld")
    label = resolution_label(upheld, record, text="you are a total idiot", labels={})
    assert label is not None
    earlier = Label("m-1", "you are a total idiot", {"harassment": 1, "profanity": 0}, "rev-1", 1500.0)
    merged = merged_label(earlier, label)
    assert merged is not None and merged.labels == {"harassment": 1, "profanity": 1} and merged.reviewer == "rev-7"
    replaced = merged_label(replace(earlier, text="a threat, another text"), label)  # not of this text: replaced
    assert replaced is not None and replaced.labels == {"profanity": 1}
    assert merged_label(replace(earlier, labelled_at=2200.0), label) is None  # a later label stands
    # in the store, read and written in one transaction
    store = LabelStore(tmp_path / "labels.sqlite")
    store.submit("acme", [earlier])
    assert store.merge("acme", label) and store.label_of("acme", "m-1") == merged
    assert not store.merge("acme", replace(label, labelled_at=1000.0, labels={"hate": 1}))
    assert store.label_of("acme", "m-1") == merged and store.label_of("other", "m-1") is None


@pytest.mark.parametrize("item", ["", "x" * 129, "line\nbreak"])
def test_an_item_id_a_label_cannot_carry_is_replaced_by_the_audit_id(item: str) -> None:
    upheld, record = resolved("upheld", item=item)
    assert label_item_id(upheld) == f"audit:{record.audit_id}"
    label = resolution_label(upheld, record, text="the text", labels={})
    assert label is not None and label.item_id == f"audit:{record.audit_id}"
