"""Appeals of decisions (services/router/control/appeals.py) and their storage beside the labels
(services/router/control/label_store.py, a real SQLite file)."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.common.errors import FailedPreconditionError, InvalidRequestError, LimitExceededError
from services.router.control import appeals
from services.router.control.appeals import appeal_task_id, check_appeal_id, new_appeal, resolve
from services.router.control.label_store import LabelStore
from tests.unit.router.control.test_audit import record_for


def test_an_appeal_names_its_decision_and_is_resolved_once() -> None:
    record = record_for("acme", item="m-1", at=1000.0)
    appeal = new_appeal("acme", record, appellant="user-81", statement="I quoted it to report it", now=2000.0)
    assert (appeal.tenant, appeal.audit_id, appeal.item_id, appeal.status, appeal.submitted_at) == (
        "acme", record.audit_id, "m-1", "open", 2000.0)
    assert appeal_task_id(appeal.appeal_id) == f"appeal:{appeal.appeal_id}"
    reversed_ = resolve(appeal, "reversed", reviewer="rev-7", note="counter-speech", now=2100.0)
    assert (reversed_.status, reversed_.reviewer, reversed_.note, reversed_.resolved_at) == (
        "reversed", "rev-7", "counter-speech", 2100.0)
    with pytest.raises(FailedPreconditionError, match="already resolved \\(reversed by rev-7\\); its outcome stands"):
        resolve(reversed_, "upheld", reviewer="rev-8", note="", now=2200.0)


@pytest.mark.parametrize("appellant, statement, message", [
    ("", "why", "appellant: required"),
    ("u\x00", "why", "appellant: printable characters only on one line"),
    ("u-1\nforged log line", "why", "appellant: printable characters only on one line"),
    ("u-1", "x" * 5001, "statement: 5001 characters, at most 5000"),
])
def test_a_bad_appeal_is_refused_naming_the_field(appellant: str, statement: str, message: str) -> None:
    with pytest.raises(InvalidRequestError, match=message):
        new_appeal("acme", record_for("acme"), appellant=appellant, statement=statement, now=1.0)


def test_a_bad_resolution_is_refused_naming_the_field() -> None:
    appeal = new_appeal("acme", record_for("acme"), appellant="u-1", statement="line one\nline two", now=1.0)
    with pytest.raises(InvalidRequestError, match="outcome: 'overturned' is not one of upheld, reversed"):
        resolve(appeal, "overturned", reviewer="rev-7", note="", now=2.0)
    with pytest.raises(InvalidRequestError, match="reviewer: required"):
        resolve(appeal, "upheld", reviewer=" ", note="", now=2.0)
    with pytest.raises(InvalidRequestError, match="reviewer: printable characters only on one line"):
        resolve(appeal, "upheld", reviewer="rev-7\nrev-8", note="", now=2.0)
    with pytest.raises(InvalidRequestError, match="appeal_id: required"):
        check_appeal_id("")
    windows = new_appeal("acme", record_for("acme"), appellant="u-1", statement="line one\r\nline two\tend", now=1.0)
    assert windows.statement == "line one\nline two\tend"


def test_appeals_are_stored_per_tenant_and_the_first_outcome_stands(tmp_path: Path) -> None:
    store = LabelStore(tmp_path / "labels.sqlite")
    record = record_for("acme", item="m-1", at=1000.0)
    first = new_appeal("acme", record, appellant="u-1", statement="first", now=2000.0)
    second = new_appeal("acme", record, appellant="u-1", statement="again", now=2001.0)
    other = new_appeal("globex", record_for("globex", item="m-1"), appellant="u-9", statement="", now=2000.0)
    for appeal in (first, second, other):
        store.add_appeal(appeal)
    assert store.get_appeal("acme", first.appeal_id) == first and store.get_appeal("globex", first.appeal_id) is None
    assert store.appeals_of("acme", record.audit_id) == [first, second] and store.appeals_of("globex", record.audit_id) == []
    upheld = resolve(first, "upheld", reviewer="rev-7", note="", now=2100.0)
    store.save_resolution(upheld)
    assert store.get_appeal("acme", first.appeal_id) == upheld
    # a second reviewer resolving from a stale read: refused, the first outcome stands
    with pytest.raises(FailedPreconditionError, match="already resolved \\(upheld by rev-7\\)"):
        store.save_resolution(resolve(first, "reversed", reviewer="rev-8", note="", now=2200.0))
    assert store.get_appeal("acme", first.appeal_id) == upheld
    store.close()
    assert LabelStore(tmp_path / "labels.sqlite").appeals_of("acme", record.audit_id)[0] == upheld  # on disk


def test_a_tenant_at_its_appeal_bound_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(appeals, "MAX_APPEALS_PER_TENANT", 2)
    store = LabelStore(tmp_path / "labels.sqlite")
    record = record_for("acme")
    for _ in range(2):
        store.add_appeal(new_appeal("acme", record, appellant="u-1", statement="", now=1.0))
    with pytest.raises(LimitExceededError, match="holds 2 appeals, the limit"):
        store.add_appeal(new_appeal("acme", record, appellant="u-1", statement="", now=1.0))
    store.add_appeal(new_appeal("globex", record_for("globex"), appellant="u-1", statement="", now=1.0))  # its own bound


def test_one_decision_takes_at_most_ten_appeals_and_erasing_an_item_erases_its_appeals(tmp_path: Path) -> None:
    store = LabelStore(tmp_path / "labels.sqlite")
    record = record_for("acme", item="m-1")
    for _ in range(10):
        store.add_appeal(new_appeal("acme", record, appellant="u-1", statement="again", now=1.0))
    with pytest.raises(LimitExceededError, match="has 10 appeals, the most one decision may have"):
        store.add_appeal(new_appeal("acme", record, appellant="u-2", statement="", now=2.0))
    other = record_for("acme", item="m-2")
    store.add_appeal(new_appeal("acme", other, appellant="u-2", statement="", now=2.0))
    assert store.delete("acme", ["m-1"]) == 0  # no label of m-1, but its appeals hold what users wrote
    assert store.appeals_of("acme", record.audit_id) == [] and len(store.appeals_of("acme", other.audit_id)) == 1
