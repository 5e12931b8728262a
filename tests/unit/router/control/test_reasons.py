"""The statement of reasons of a decision (services/router/control/reasons.py), from its audit record and
its appeals."""

from __future__ import annotations

from dataclasses import replace

from services.router.control.appeals import new_appeal, resolve
from services.router.control.reasons import DEFAULT_REDRESS, statement_of_reasons
from tests.unit.router.control.test_audit import record_for


def test_a_block_names_its_grounds_facts_models_and_redress_and_is_automated() -> None:
    record = record_for("acme", at=1000.0)
    statement = statement_of_reasons(record)
    assert (statement.audit_id, statement.item_id, statement.decided_at) == (record.audit_id, "i1", 1000.0)
    assert (statement.decision, statement.restriction) == ("block", "removed")
    assert (statement.policy_name, statement.policy_version) == ("default", "7")
    assert statement.grounds and all(c.action != "allow" for c in statement.grounds)
    assert {c.category for c in statement.grounds} == {c.category for c in record.categories if c.action != "allow"}
    assert statement.facts == record.evidence and statement.models == record.models
    assert statement.automated_detection and statement.automated_decision and not statement.degraded
    assert (statement.reviewed_by, statement.reviewed_at, statement.redress, statement.appeals) == ("", 0.0, DEFAULT_REDRESS, ())


def test_an_allow_restricts_nothing_and_a_degraded_decision_says_so() -> None:
    record = record_for("acme")
    allowed = replace(record, decision="allow", categories=tuple(replace(c, action="allow") for c in record.categories),
                      degraded=True)
    statement = statement_of_reasons(allowed, redress="appeal at https://example.test/appeal")
    assert (statement.restriction, statement.grounds, statement.redress, statement.degraded) == (
        "none", (), "appeal at https://example.test/appeal", True)


def test_only_a_resolved_appeal_makes_the_decision_a_persons() -> None:
    record = record_for("acme", at=1000.0)
    first = new_appeal("acme", record, appellant="u-1", statement="a quote", now=1100.0)
    second = new_appeal("acme", record, appellant="u-1", statement="again", now=1200.0)
    pending = statement_of_reasons(record, appeals=(first,))
    assert pending.automated_decision and pending.appeals == (first,) and pending.reviewed_by == ""
    upheld = resolve(first, "upheld", reviewer="rev-7", note="", now=1300.0)
    reversed_ = resolve(second, "reversed", reviewer="rev-9", note="", now=1400.0)
    decided = statement_of_reasons(record, appeals=(upheld, reversed_))
    assert not decided.automated_decision and (decided.reviewed_by, decided.reviewed_at) == ("rev-9", 1400.0)
