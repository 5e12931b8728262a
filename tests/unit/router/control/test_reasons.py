"""The statement of reasons of a decision (services/router/control/reasons.py), from its audit record and
the item's label."""

from __future__ import annotations

from dataclasses import replace

from services.router.control.label_store import Label
from services.router.control.reasons import DEFAULT_REDRESS, statement_of_reasons
from tests.unit.router.control.test_audit import record_for


def test_a_block_names_its_grounds_facts_models_and_redress_and_is_automated() -> None:
    record = record_for("acme", at=1000.0)
    statement = statement_of_reasons(record, None)
    assert (statement.audit_id, statement.item_id, statement.decided_at) == (record.audit_id, "i1", 1000.0)
    assert (statement.decision, statement.restriction) == ("block", "removed")
    assert (statement.policy_name, statement.policy_version) == ("default", "7")
    assert statement.grounds and all(c.action != "allow" for c in statement.grounds)
    assert {c.category for c in statement.grounds} == {c.category for c in record.categories if c.action != "allow"}
    assert statement.facts == record.evidence and statement.models == record.models
    assert statement.automated_detection and statement.automated_decision
    assert (statement.reviewed_by, statement.reviewed_at, statement.redress) == ("", 0.0, DEFAULT_REDRESS)


def test_an_allow_restricts_nothing_and_has_no_grounds() -> None:
    record = record_for("acme")
    allowed = replace(record, decision="allow", categories=tuple(replace(c, action="allow") for c in record.categories))
    statement = statement_of_reasons(allowed, None, redress="appeal at https://example.test/appeal")
    assert (statement.restriction, statement.grounds, statement.redress) == (
        "none", (), "appeal at https://example.test/appeal")


def test_a_reviewers_label_at_or_after_the_decision_makes_it_a_persons() -> None:
    record = record_for("acme", at=1000.0)
    reviewed = statement_of_reasons(record, Label("i1", "text", {"hate": 1}, "rev-7", 1000.0))
    assert not reviewed.automated_decision and (reviewed.reviewed_by, reviewed.reviewed_at) == ("rev-7", 1000.0)
    earlier = statement_of_reasons(record, Label("i1", "text", {"hate": 0}, "rev-7", 999.0))  # another decision's review
    assert earlier.automated_decision and (earlier.reviewed_by, earlier.reviewed_at) == ("", 0.0)
