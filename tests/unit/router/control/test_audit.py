"""Audit records keep no raw content unless the policy opts in; the store answers one tenant's
records only, by time, in pages, and deletes records past retention."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.common.errors import InvalidRequestError
from services.router.control.audit import AuditInput, AuditRecord, audit_record, evidence_reference
from services.router.control.audit_store import AuditStore
from services.router.fusion import (BlockMatch, ImageScoreEvidence, OcrLineEvidence, OcrLineFinding, Signals,
                                    TextFinding, TextSpanEvidence, fuse)
from services.router.policy import AuditRules, PolicyDocument, compile_policy
from tests.stubs import FakeClock

TEXT = "you are a total idiot"


def record_for(tenant: str, *, include_content: bool = False, at: float = 1000.0, item: str = "i1") -> AuditRecord:
    policy = compile_policy(PolicyDocument("default", "7", audit=AuditRules(include_content=include_content)))
    line = OcrLineFinding(1, 0, "idiot on a sign", 0.9, ((0, 0), (10, 0), (10, 5), (0, 5)))
    signals = Signals(texts=[TextFinding(0, TEXT, {"hate": 0.95}, [BlockMatch("profanity", "idiot", 2, 16, 21, "idiot", "default")]),
                             TextFinding(1, line.text, {}, [BlockMatch("profanity", "idiot", 2, 0, 5, "idiot", "default")], 0)],
                      ocr_lines=[line])
    verdict = fuse(policy, signals)
    return audit_record(AuditInput(tenant, "r1", item, {"channel": "c1"}, [TEXT], policy, verdict,
                                   [("text_moderation", "1"), ("toxicity_en", "1")], "candidate"), now=at)


def test_no_raw_content_by_default() -> None:
    record = record_for("acme")
    assert record.decision == "block" and record.policy_version == "7" and record.canary_arm == "candidate"
    assert record.content == () and record.metadata == {"channel": "c1"}
    assert TEXT not in repr(record) and "idiot on a sign" not in repr(record)
    span = next(e for e in record.evidence if isinstance(e, TextSpanEvidence) and e.lexicon == "default" and e.part_index == 0)
    assert (span.start, span.end, span.matched_term, span.text) == (16, 21, "idiot", "")
    line = next(e for e in record.evidence if isinstance(e, OcrLineEvidence))
    assert line.line.line_index == 0 and line.line.polygon[2] == (10, 5) and line.line.text == ""
    stored = [evidence_reference(e) for e in record.evidence]
    assert all("text" not in e for e in stored) and TEXT not in repr(stored)


def test_content_only_when_the_policy_opts_in() -> None:
    record = record_for("acme", include_content=True)
    assert record.content == (TEXT,)
    assert any(isinstance(e, OcrLineEvidence) and e.line.text == "idiot on a sign" for e in record.evidence)
    assert any(e.get("text") == "idiot on a sign" for e in (evidence_reference(e) for e in record.evidence))


def test_queries_return_one_tenants_records_by_time_and_page(tmp_path: Path) -> None:
    store = AuditStore(tmp_path / "audit.sqlite", clock=FakeClock(200.0))
    for i in range(5):
        store.append(record_for("acme", at=100.0 + i, item=f"a{i}"))
        store.append(record_for("globex", at=100.0 + i, item=f"g{i}"))
    page, token = store.query("acme", since=101.0, until=104.0, limit=2)
    assert [r.item_id for r in page] == ["a1", "a2"] and token
    page, token = store.query("acme", since=101.0, until=104.0, limit=2, page_token=token)
    assert [r.item_id for r in page] == ["a3"] and token == ""
    everything, _ = store.query("globex", limit=1000)
    assert {r.tenant for r in everything} == {"globex"} and len(everything) == 5
    assert everything[0] == AuditRecord.from_json_dict(everything[0].to_json_dict())
    assert store.query("initech")[0] == []
    assert store.get("globex", everything[2].audit_id) == everything[2]  # one record by id, its own tenant's only
    assert store.get("acme", everything[2].audit_id) is None and store.get("globex", "nope") is None
    with pytest.raises(InvalidRequestError, match="tenant: required"):
        store.query("")
    with pytest.raises(InvalidRequestError, match="page_token"):
        store.query("acme", page_token="acme' OR 1=1 --")


def test_retention_deletes_old_records(tmp_path: Path) -> None:
    clock = FakeClock(10_000.0)
    store = AuditStore(tmp_path / "audit.sqlite", retention_s=3600.0, clock=clock)
    store.append(record_for("acme", at=5_000.0, item="old"))
    store.append(record_for("acme", at=9_999.0, item="new"))
    store.flush()
    assert [r.item_id for r in store.query("acme")[0]] == ["new"]


def test_full_buffer_drops_the_oldest_and_counts(tmp_path: Path) -> None:
    store = AuditStore(tmp_path / "audit.sqlite", max_pending=2, clock=FakeClock(2000.0))
    for i in range(3):
        store.append(record_for("acme", item=f"i{i}"))
    assert store.dropped == 1 and store.flush() == 2
    assert [r.item_id for r in store.query("acme")[0]] == ["i1", "i2"]


def test_json_dict_has_every_field_and_round_trips() -> None:
    import dataclasses
    import json

    from services.router.control.audit import AuditCategory, AuditRecord
    record = AuditRecord("a1", "r1", "i1", "acme", 12.5, "block", (AuditCategory("hate", 0.9, "block", "threshold"),),
                         "default", "v1", (("toxicity_en", "3"),),
                         (ImageScoreEvidence("sexual", 0, "opennsfw", {"sexual": 0.25}),
                          TextSpanEvidence("hate", 1, 2, 7, "", "idiot", "default", -1, 0.5)), True, "candidate",
                         {"k": "v"}, ("text",))
    data = json.loads(json.dumps(record.to_json_dict()))
    assert set(data) == {f.name for f in dataclasses.fields(AuditRecord)}
    assert AuditRecord.from_json_dict(data) == record


def test_new_records_carry_the_taxonomy_profile_and_categories() -> None:
    record = record_for("acme")
    assert (record.taxonomy, record.profile) == (2, "balanced")
    assert {c.category for c in record.categories} == {"profanity"}
    assert record.to_json_dict()["taxonomy"] == 2


def test_a_taxonomy_1_record_stored_before_the_split_still_reads_back() -> None:
    stored = {"audit_id": "a0", "request_id": "r", "item_id": "i", "tenant": "acme", "time": 1.0, "decision": "block",
              "categories": [{"category": "hate", "score": 0.97, "action": "block", "rule": "categories.hate.block >= 0.9"}],
              "policy_name": "default", "policy_version": "2026-11-29.1", "models": [["toxicity_en", "1"]],
              "evidence": [], "degraded": False, "canary_arm": "", "metadata": {}, "content": []}
    record = AuditRecord.from_json_dict(stored)
    assert (record.taxonomy, record.profile, record.categories[0].category) == (1, "", "hate")


def test_keys_a_newer_router_adds_are_ignored_on_read() -> None:
    data = {**record_for("acme").to_json_dict(), "added_later": 1}
    assert AuditRecord.from_json_dict(data).taxonomy == 2


def test_records_stored_before_typed_evidence_still_read() -> None:
    stored = {"audit_id": "a1", "request_id": "r1", "item_id": "i1", "tenant": "acme", "time": 1.0, "decision": "review",
              "categories": [{"category": "profanity", "score": 1.0, "action": "review", "rule": "blocklist"}],
              "policy_name": "default", "policy_version": "1", "models": [["text_moderation", "1"]],
              "evidence": [{"category": "profanity", "part": 0, "kind": "text_span", "start": 0, "end": 4, "lexicon": "default",
                            "term": "shit", "ocr_line": -1, "score": 1.0},
                           {"category": "profanity", "part": 1, "kind": "ocr_line", "line": 2, "confidence": 0.9,
                            "polygon": [[0, 0], [1, 0], [1, 1], [0, 1]]}],
              "degraded": False, "canary_arm": "", "metadata": {}, "content": []}
    record = AuditRecord.from_json_dict(stored)
    assert record.evidence[0] == TextSpanEvidence("profanity", 0, 0, 4, "", "shit", "default", -1, 1.0)
    assert isinstance(record.evidence[1], OcrLineEvidence) and record.evidence[1].line.line_index == 2
    assert record.to_json_dict()["evidence"] == stored["evidence"]
