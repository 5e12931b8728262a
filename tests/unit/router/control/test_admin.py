"""The PolicyAdmin service over a real in-process gRPC server: admin keys apart from tenant keys,
tenant-scoped keys, precise INVALID_ARGUMENT messages, versions, diff, activation, canaries, audit
isolation."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import AsyncIterator

import grpc
import pytest
from auditmesh.v1 import admin_pb2 as apb
from auditmesh.v1 import moderation_pb2 as pb

from services.router.control.admin_auth import AdminKey
from services.router.control.audit import AuditInput, AuditRecord, audit_record
from services.router.fusion import Verdict
from services.router.tenants import hash_key
from tests.stubs import AdminApi, admin_api, admin_key, policy_yaml, status_of

ROOT_KEY, SCOPED_KEY = "root-admin-key", "a-only-admin-key"


@pytest.fixture
async def admin(tmp_path: Path) -> AsyncIterator[AdminApi]:
    keys = [AdminKey("root", hash_key(ROOT_KEY)), AdminKey("a-team", hash_key(SCOPED_KEY), ("a",))]
    async with admin_api(tmp_path, keys) as api:
        yield api


async def test_admin_keys_are_not_tenant_keys(admin: AdminApi) -> None:
    stub = admin.stub
    request = apb.ListVersionsRequest(kind=apb.POLICY, name="default")
    assert (await status_of(stub.ListVersions(request)))[0] == grpc.StatusCode.UNAUTHENTICATED
    assert await status_of(stub.ListVersions(request, metadata=admin_key("key-a"))) == (grpc.StatusCode.UNAUTHENTICATED,
                                                                                      "unknown admin key")
    listed = await stub.ListVersions(request, metadata=admin_key(ROOT_KEY))
    assert [(v.version, list(v.active_in)) for v in listed.versions] == [("1", [""])]


async def test_put_diff_activate_rollback(admin: AdminApi) -> None:
    stub = admin.stub
    bad = apb.PutVersionRequest(kind=apb.POLICY, name="default",
                                content="name: default\nversion: '2'\ncategories: {hate: {review: 0.9, block: 0.5}}\n")
    assert await status_of(stub.PutVersion(bad, metadata=admin_key(ROOT_KEY))) == (
        grpc.StatusCode.INVALID_ARGUMENT, "policy/default: categories.hate: review (0.9) must not be above block (0.5)")
    put = apb.PutVersionRequest(kind=apb.POLICY, name="default", content=policy_yaml("default", "2", hate_block=0.8),
                                author="alice", comment="incident 42: stricter hate")
    info = await stub.PutVersion(put, metadata=admin_key(ROOT_KEY))
    assert (info.version, info.author, info.comment) == ("2", "alice (admin key root)", "incident 42: stricter hate")
    assert len(info.content_hash) == 64 and info.created_at > 0 and not info.active_in
    reuse = apb.PutVersionRequest(kind=apb.POLICY, name="default", content=policy_yaml("default", "2", hate_block=0.7))
    assert (await status_of(stub.PutVersion(reuse, metadata=admin_key(ROOT_KEY))))[0] == grpc.StatusCode.ALREADY_EXISTS
    diff = await stub.DiffVersions(apb.DiffVersionsRequest(kind=apb.POLICY, name="default", from_version="1",
                                                           to_version="2"), metadata=admin_key(ROOT_KEY))
    assert [(c.path, c.op, c.from_value, c.to_value) for c in diff.changes] == [
        ("categories.hate.block", "changed", "0.9", "0.8"), ("version", "changed", '"1"', '"2"')]
    assert "-  hate: {review: 0.5, block: 0.9}" in diff.unified_diff
    activated = await stub.Activate(apb.ActivateRequest(kind=apb.POLICY, name="default", version="2"), metadata=admin_key(ROOT_KEY))
    assert (activated.version, activated.previous_version) == ("2", "1")
    current = await stub.GetVersion(apb.GetVersionRequest(kind=apb.POLICY, name="default"), metadata=admin_key(ROOT_KEY))
    assert current.info.version == "2" and "block: 0.8" in current.content
    rolled = await stub.Rollback(apb.RollbackRequest(kind=apb.POLICY, name="default"), metadata=admin_key(ROOT_KEY))
    assert (rolled.version, rolled.previous_version) == ("1", "2")
    missing = apb.ActivateRequest(kind=apb.POLICY, name="default", version="9")
    assert (await status_of(stub.Activate(missing, metadata=admin_key(ROOT_KEY))))[0] == grpc.StatusCode.NOT_FOUND


async def test_scoped_key_acts_only_on_its_tenants(admin: AdminApi) -> None:
    stub = admin.stub
    # A scoped key stores versions of its tenants only ("a:<id>"; tests/security/test_admin_scoped_keys.py).
    await stub.PutVersion(apb.PutVersionRequest(kind=apb.POLICY, name="default", content=policy_yaml("default", "a:2")),
                          metadata=admin_key(SCOPED_KEY))
    code, message = await status_of(stub.Activate(apb.ActivateRequest(kind=apb.POLICY, name="default", version="a:2"),
                                                metadata=admin_key(SCOPED_KEY)))
    assert code == grpc.StatusCode.PERMISSION_DENIED and "not on all tenants" in message
    own = await stub.Activate(apb.ActivateRequest(kind=apb.POLICY, name="default", version="a:2", tenant="a"),
                              metadata=admin_key(SCOPED_KEY))
    assert own.tenant == "a" and own.version == "a:2"
    tenants = apb.GetVersionRequest(kind=apb.TENANTS)
    assert (await status_of(stub.GetVersion(tenants, metadata=admin_key(SCOPED_KEY))))[0] == grpc.StatusCode.PERMISSION_DENIED


async def test_audit_isolation_between_tenants(admin: AdminApi) -> None:
    stub = admin.stub
    policy = admin.control.runtime.snapshot.policies["default"]
    for tenant in ("a", "b"):
        admin.audit.append(audit_record(AuditInput(tenant, "r", f"{tenant}-item", {}, ["secret text"], policy, Verdict("allow"), []),
                                  now=time.time()))
    own = await stub.QueryAudit(apb.QueryAuditRequest(tenant="a"), metadata=admin_key(SCOPED_KEY))
    assert [(r.tenant, r.item_id, r.policy_version) for r in own.records] == [("a", "a-item", "1")]
    assert not own.records[0].content
    code, _ = await status_of(stub.QueryAudit(apb.QueryAuditRequest(tenant="b"), metadata=admin_key(SCOPED_KEY)))
    assert code == grpc.StatusCode.PERMISSION_DENIED
    code, message = await status_of(stub.QueryAudit(apb.QueryAuditRequest(), metadata=admin_key(ROOT_KEY)))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and message.startswith("tenant: required")
    other = await stub.QueryAudit(apb.QueryAuditRequest(tenant="b"), metadata=admin_key(ROOT_KEY))
    assert [r.tenant for r in other.records] == ["b"]


async def test_canary_through_the_api(admin: AdminApi) -> None:
    stub = admin.stub
    await stub.PutVersion(apb.PutVersionRequest(kind=apb.POLICY, name="default", content=policy_yaml("default", "2")),
                          metadata=admin_key(ROOT_KEY))
    started = await stub.StartCanary(apb.StartCanaryRequest(policy="default", candidate_version="2", percent=10, shadow=True,
                                                            bounds=apb.CanaryBounds(min_samples=7)), metadata=admin_key(ROOT_KEY))
    assert (started.baseline_version, started.candidate_version, started.running) == ("1", "2", True)
    assert started.bounds.min_samples == 7 and started.bounds.max_block_rate_delta == pytest.approx(0.1)
    bad = apb.StartCanaryRequest(policy="default", candidate_version="2", percent=150)
    assert await status_of(stub.StartCanary(bad, metadata=admin_key(ROOT_KEY))) == (
        grpc.StatusCode.INVALID_ARGUMENT, "percent must be in (0, 100], got 150.0")
    stopped = await stub.StopCanary(apb.StopCanaryRequest(policy="default"), metadata=admin_key(ROOT_KEY))
    assert not stopped.running and stopped.stopped_reason == "stopped by admin key root"


async def test_labels_go_in_and_out_one_tenant_at_a_time(admin: AdminApi) -> None:
    stub = admin.stub
    item = apb.LabelledItem(item_id="m-1", text="free airdrop, connect your wallet", reviewer="rev-7",
                            labels={"custom.crypto_scam": True, "spam": False})
    done = await stub.SubmitLabels(apb.SubmitLabelsRequest(tenant="a", items=[item]), metadata=admin_key(SCOPED_KEY))
    assert (done.added, done.replaced, done.tenant_total) == (1, 0, 1)
    page = await stub.ExportLabels(apb.ExportLabelsRequest(tenant="a"), metadata=admin_key(ROOT_KEY))
    assert [(i.item_id, i.text, dict(i.labels), i.reviewer) for i in page.items] == [
        ("m-1", item.text, {"custom.crypto_scam": True, "spam": False}, "rev-7")]
    assert not page.next_page_token and page.items[0].labelled_at > 0
    # a key scoped to tenant a can neither read nor write b's labels; b has none of a's
    for call in (stub.SubmitLabels(apb.SubmitLabelsRequest(tenant="b", items=[item]), metadata=admin_key(SCOPED_KEY)),
                 stub.ExportLabels(apb.ExportLabelsRequest(tenant="b"), metadata=admin_key(SCOPED_KEY))):
        assert (await status_of(call))[0] == grpc.StatusCode.PERMISSION_DENIED
    assert not (await stub.ExportLabels(apb.ExportLabelsRequest(tenant="b"), metadata=admin_key(ROOT_KEY))).items
    # deleting: b's key scope cannot erase a's labels; a's own key can, and only a's
    refused = stub.DeleteLabels(apb.DeleteLabelsRequest(tenant="b", item_ids=["m-1"]), metadata=admin_key(SCOPED_KEY))
    assert (await status_of(refused))[0] == grpc.StatusCode.PERMISSION_DENIED
    await stub.SubmitLabels(apb.SubmitLabelsRequest(tenant="b", items=[item]), metadata=admin_key(ROOT_KEY))
    gone = await stub.DeleteLabels(apb.DeleteLabelsRequest(tenant="a", item_ids=["m-1", "m-2"]), metadata=admin_key(SCOPED_KEY))
    assert (gone.deleted, gone.tenant_total) == (1, 0)
    assert [i.item_id for i in (await stub.ExportLabels(apb.ExportLabelsRequest(tenant="b"),
                                                        metadata=admin_key(ROOT_KEY))).items] == ["m-1"]
    assert await status_of(stub.DeleteLabels(apb.DeleteLabelsRequest(tenant="a"), metadata=admin_key(ROOT_KEY))) == (
        grpc.StatusCode.INVALID_ARGUMENT, "item_ids: name at least one item whose labels to delete")


async def test_the_command_line_erases_a_tenants_labels(admin: AdminApi, capsys: pytest.CaptureFixture[str]) -> None:
    from services.cli import main

    items = [apb.LabelledItem(item_id=f"m-{i}", text="free airdrop", labels={"spam": True}) for i in range(3)]
    await admin.stub.SubmitLabels(apb.SubmitLabelsRequest(tenant="a", items=items), metadata=admin_key(ROOT_KEY))
    code = await asyncio.to_thread(main, ["labels", "delete", "m-0", "m-2", "--tenant", "a", "--admin", admin.address,
                                          "--admin-key", SCOPED_KEY])
    assert code == 0 and json.loads(capsys.readouterr().out) == {"tenant": "a", "item_ids": 2, "deleted": 2,
                                                                  "tenant_total": 1}
    code = await asyncio.to_thread(main, ["labels", "delete", "m-1", "--tenant", "b", "--admin", admin.address,
                                          "--admin-key", SCOPED_KEY])
    assert code == 1 and "DeleteLabels after 0 of 1 ids: PERMISSION_DENIED" in capsys.readouterr().err


async def test_bad_labels_are_refused_with_the_item_and_field_named(admin: AdminApi) -> None:
    stub, root = admin.stub, admin_key(ROOT_KEY)
    good = apb.LabelledItem(item_id="m-1", text="hi", labels={"spam": False})
    bad = apb.LabelledItem(item_id="m-2", text="hi", labels={"Spam": True})
    assert await status_of(stub.SubmitLabels(apb.SubmitLabelsRequest(tenant="a", items=[good, bad]), metadata=root)) == (
        grpc.StatusCode.INVALID_ARGUMENT, "items[1].labels.Spam: unknown category 'Spam': use one of harassment, hate, "
        "violence, self_harm, sexual, profanity, spam or custom.<name> (lower-case letters, digits, underscores)")
    assert (await status_of(stub.SubmitLabels(apb.SubmitLabelsRequest(items=[good]), metadata=root)))[0] == \
        grpc.StatusCode.INVALID_ARGUMENT
    assert await status_of(stub.SubmitLabels(apb.SubmitLabelsRequest(tenant="nobody", items=[good]), metadata=root)) == (
        grpc.StatusCode.NOT_FOUND, "tenant: no tenant 'nobody' in the active tenants version")
    assert (await status_of(stub.ExportLabels(apb.ExportLabelsRequest(tenant="a", page_token="%%"), metadata=root)))[0] == \
        grpc.StatusCode.INVALID_ARGUMENT
    assert not (await stub.ExportLabels(apb.ExportLabelsRequest(tenant="a"), metadata=root)).items  # nothing stored


async def test_review_tasks_stream_within_the_window_and_acks_free_it(admin: AdminApi) -> None:
    from tests.unit.router.control.test_audit import record_for

    for i in range(3):
        admin.reviews.offer(record_for("a", item=f"m-{i}", at=time.time()), "review")
    admin.reviews.offer(record_for("b", item="b-1", at=time.time()), "review")
    admin.reviews.flush()
    stream = admin.stub.StreamReviewTasks(apb.StreamReviewTasksRequest(tenant="a", max_unacked=2, visibility_timeout_s=30),
                                          metadata=admin_key(SCOPED_KEY))
    first, second = await stream.read(), await stream.read()
    assert [(t.record.item_id, t.reason, t.deliveries, t.record.tenant) for t in (first, second)] == [
        ("m-0", "review", 1, "a"), ("m-1", "review", 1, "a")]
    assert first.task_id == first.record.audit_id
    pending = asyncio.ensure_future(stream.read())
    await asyncio.sleep(0.3)  # several polls: the window (2) is full, so m-2 waits
    assert not pending.done()
    done = await admin.stub.AckReviewTasks(apb.AckReviewTasksRequest(tenant="a", task_ids=[first.task_id]),
                                           metadata=admin_key(SCOPED_KEY))
    assert done.acked == 1
    third = await asyncio.wait_for(pending, 5.0)  # the ack made room in the window
    assert third.record.item_id == "m-2"
    stream.cancel()
    unknown = admin.stub.StreamReviewTasks(apb.StreamReviewTasksRequest(tenant="nobody"), metadata=admin_key(ROOT_KEY))
    assert (await status_of(unknown.read()))[0] == grpc.StatusCode.NOT_FOUND
    opened = [admin.stub.StreamReviewTasks(apb.StreamReviewTasksRequest(tenant="b"), metadata=admin_key(ROOT_KEY))
              for _ in range(4)]
    await asyncio.sleep(0.3)  # the four are being served
    fifth = admin.stub.StreamReviewTasks(apb.StreamReviewTasksRequest(tenant="b"), metadata=admin_key(ROOT_KEY))
    assert await status_of(fifth.read()) == (grpc.StatusCode.RESOURCE_EXHAUSTED,
                                             "tenant 'b' has 4 review-task streams open, the most it may; close one or "
                                             "consume from fewer")
    for each in opened:
        each.cancel()
    refused = admin.stub.StreamReviewTasks(apb.StreamReviewTasksRequest(tenant="b"), metadata=admin_key(SCOPED_KEY))
    assert (await status_of(refused.read()))[0] == grpc.StatusCode.PERMISSION_DENIED
    bad = admin.stub.StreamReviewTasks(apb.StreamReviewTasksRequest(tenant="a", max_unacked=5000), metadata=admin_key(ROOT_KEY))
    assert await status_of(bad.read()) == (grpc.StatusCode.INVALID_ARGUMENT, "max_unacked: must be 1..1000, got 5000")
    assert admin.reviews.pending("b") == 1


async def test_a_statement_of_reasons_is_read_one_tenant_at_a_time(admin: AdminApi) -> None:
    from tests.unit.router.control.test_audit import record_for

    stub, root, scoped = admin.stub, admin_key(ROOT_KEY), admin_key(SCOPED_KEY)
    decided = time.time() - 60
    record, other = record_for("a", item="m-1", at=decided), record_for("b", item="b-1", at=decided)
    admin.audit.append(record)
    admin.audit.append(other)
    statement = await stub.GetStatementOfReasons(apb.GetStatementOfReasonsRequest(tenant="a", audit_id=record.audit_id),
                                                 metadata=scoped)
    assert (statement.audit_id, statement.item_id, statement.decision, statement.restriction) == (
        record.audit_id, "m-1", pb.BLOCK, "removed")
    assert (statement.policy_name, statement.policy_version) == ("default", "7")
    assert [g.category for g in statement.grounds] == [c.category for c in record.categories if c.action != "allow"]
    assert len(statement.facts) == len(record.evidence) and statement.redress and not statement.appeals
    assert statement.automated_detection and statement.automated_decision and not statement.reviewed_by
    # b's decision: out of the scoped key's reach, and not a's to read even with a global key
    refused = stub.GetStatementOfReasons(apb.GetStatementOfReasonsRequest(tenant="b", audit_id=other.audit_id), metadata=scoped)
    assert (await status_of(refused))[0] == grpc.StatusCode.PERMISSION_DENIED
    code, message = await status_of(stub.GetStatementOfReasons(
        apb.GetStatementOfReasonsRequest(tenant="a", audit_id=other.audit_id), metadata=root))
    assert code == grpc.StatusCode.NOT_FOUND and message.startswith(f"audit_id: no decision {other.audit_id!r} of tenant 'a'")
    assert (await status_of(stub.GetStatementOfReasons(apb.GetStatementOfReasonsRequest(tenant="a"), metadata=root)))[0] == \
        grpc.StatusCode.INVALID_ARGUMENT
    # a reviewer's label of the item is not a person's decision of this decision (labels belong to items)
    item = apb.LabelledItem(item_id="m-1", text="the item", labels={"hate": True}, reviewer="rev-7")
    await stub.SubmitLabels(apb.SubmitLabelsRequest(tenant="a", items=[item]), metadata=scoped)
    labelled = await stub.GetStatementOfReasons(apb.GetStatementOfReasonsRequest(tenant="a", audit_id=record.audit_id),
                                                metadata=scoped)
    assert labelled.automated_decision and not labelled.reviewed_by


async def test_the_command_line_prints_a_statement_of_reasons(admin: AdminApi, capsys: pytest.CaptureFixture[str]) -> None:
    from services.cli import main
    from tests.unit.router.control.test_audit import record_for

    record = record_for("a", item="m-1", at=time.time() - 60)
    admin.audit.append(record)
    code = await asyncio.to_thread(main, ["reasons", record.audit_id, "--tenant", "a", "--admin", admin.address,
                                          "--admin-key", SCOPED_KEY])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and (out["audit_id"], out["restriction"], out["automated_decision"]) == (record.audit_id, "removed", True)
    assert out["reviewed_by"] == "" and out["grounds"] and out["facts"]
    code = await asyncio.to_thread(main, ["reasons", "nope", "--tenant", "a", "--admin", admin.address, "--admin-key", SCOPED_KEY])
    assert code == 1 and "auditmesh reasons: NOT_FOUND: audit_id: no decision 'nope'" in capsys.readouterr().err


async def test_an_appeal_becomes_a_task_is_resolved_once_and_shows_in_the_statement(admin: AdminApi) -> None:
    from tests.unit.router.control.test_audit import record_for

    stub, root, scoped = admin.stub, admin_key(ROOT_KEY), admin_key(SCOPED_KEY)
    record, other = record_for("a", item="m-1", at=time.time() - 60), record_for("b", item="b-1", at=time.time() - 60)
    admin.audit.append(record)
    admin.audit.append(other)
    appeal = await stub.SubmitAppeal(apb.SubmitAppealRequest(tenant="a", audit_id=record.audit_id, appellant="user-81",
                                                             statement="I quoted it to report it"), metadata=scoped)
    assert (appeal.tenant, appeal.audit_id, appeal.item_id, appeal.status) == ("a", record.audit_id, "m-1", "open")
    # it went out as a review task of its own (written before the answer), with the appeal attached
    assert admin.reviews.pending("a") == 1
    stream = stub.StreamReviewTasks(apb.StreamReviewTasksRequest(tenant="a", visibility_timeout_s=30), metadata=scoped)
    task = await asyncio.wait_for(stream.read(), 5.0)
    stream.cancel()
    assert (task.task_id, task.reason, task.record.audit_id) == (f"appeal:{appeal.appeal_id}", "appeal", record.audit_id)
    assert task.appeal == appeal
    # resolved once; the statement of reasons lists it
    done = await stub.ResolveAppeal(apb.ResolveAppealRequest(tenant="a", appeal_id=appeal.appeal_id, outcome="reversed",
                                                             reviewer="rev-7", note="counter-speech"), metadata=scoped)
    assert (done.status, done.reviewer, done.note) == ("reversed", "rev-7", "counter-speech") and done.resolved_at > 0
    again = stub.ResolveAppeal(apb.ResolveAppealRequest(tenant="a", appeal_id=appeal.appeal_id, outcome="upheld",
                                                        reviewer="rev-8"), metadata=scoped)
    assert (await status_of(again))[0] == grpc.StatusCode.FAILED_PRECONDITION
    statement = await stub.GetStatementOfReasons(apb.GetStatementOfReasonsRequest(tenant="a", audit_id=record.audit_id),
                                                 metadata=scoped)
    assert list(statement.appeals) == [done]
    assert not statement.automated_decision and (statement.reviewed_by, statement.reviewed_at) == ("rev-7", done.resolved_at)
    assert admin.reviews.pending("a") == 0  # the resolved appeal's task was acked
    # tenant scope: a's key cannot appeal or resolve for b; a's id of b's decision is not found
    for call in (stub.SubmitAppeal(apb.SubmitAppealRequest(tenant="b", audit_id=other.audit_id, appellant="u"), metadata=scoped),
                 stub.ResolveAppeal(apb.ResolveAppealRequest(tenant="b", appeal_id=appeal.appeal_id, outcome="upheld",
                                                             reviewer="r"), metadata=scoped)):
        assert (await status_of(call))[0] == grpc.StatusCode.PERMISSION_DENIED
    assert (await status_of(stub.SubmitAppeal(apb.SubmitAppealRequest(tenant="a", audit_id=other.audit_id, appellant="u"),
                                              metadata=root)))[0] == grpc.StatusCode.NOT_FOUND
    assert (await status_of(stub.ResolveAppeal(apb.ResolveAppealRequest(tenant="b", appeal_id=appeal.appeal_id,
                                                                        outcome="upheld", reviewer="r"), metadata=root)))[0] == \
        grpc.StatusCode.NOT_FOUND
    assert await status_of(stub.SubmitAppeal(apb.SubmitAppealRequest(tenant="a", audit_id=record.audit_id), metadata=root)) == (
        grpc.StatusCode.INVALID_ARGUMENT, "appellant: required")
    assert await status_of(stub.ResolveAppeal(apb.ResolveAppealRequest(tenant="a", appeal_id=appeal.appeal_id, outcome="maybe",
                                                                       reviewer="r"), metadata=root)) == (
        grpc.StatusCode.INVALID_ARGUMENT, "outcome: 'maybe' is not one of upheld, reversed")


async def test_the_command_line_submits_and_resolves_an_appeal(admin: AdminApi, capsys: pytest.CaptureFixture[str]) -> None:
    from services.cli import main
    from tests.unit.router.control.test_audit import record_for

    record = record_for("a", item="m-1", at=time.time() - 60)
    admin.audit.append(record)
    common = ["--tenant", "a", "--admin", admin.address, "--admin-key", SCOPED_KEY]
    code = await asyncio.to_thread(main, ["appeals", "submit", record.audit_id, "--appellant", "user-81",
                                          "--statement", "a quote, not my words", *common])
    appeal = json.loads(capsys.readouterr().out)
    assert code == 0 and (appeal["audit_id"], appeal["status"], appeal["appellant"]) == (record.audit_id, "open", "user-81")
    code = await asyncio.to_thread(main, ["appeals", "resolve", appeal["appeal_id"], "--outcome", "reversed",
                                          "--reviewer", "rev-7", *common])
    assert code == 0 and json.loads(capsys.readouterr().out)["status"] == "reversed"
    code = await asyncio.to_thread(main, ["appeals", "resolve", appeal["appeal_id"], "--outcome", "upheld",
                                          "--reviewer", "rev-8", *common])
    assert code == 1 and "auditmesh appeals resolve: FAILED_PRECONDITION: appeal_id: appeal" in capsys.readouterr().err


async def test_a_resolved_appeal_with_the_items_text_becomes_its_label(admin: AdminApi,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    from services.cli import main
    from tests.unit.router.control.test_audit import record_for

    stub, scoped = admin.stub, admin_key(SCOPED_KEY)
    first, second = record_for("a", item="m-1", at=time.time() - 60), record_for("a", item="m-2", at=time.time() - 60)
    for record in (first, second):
        admin.audit.append(record)

    async def appeal_of(record: AuditRecord) -> apb.Appeal:
        return await stub.SubmitAppeal(apb.SubmitAppealRequest(tenant="a", audit_id=record.audit_id, appellant="u-1"),
                                       metadata=scoped)

    appeal = await appeal_of(first)
    # a label that cannot be stored refuses the call before anything is stored: the appeal stays open
    for labels, message in (({"nudity": True}, "labels.nudity: unknown category 'nudity'"),
                            ({}, "labels: a reversal says the decision was wrong, not what the item is")):
        bad = stub.ResolveAppeal(apb.ResolveAppealRequest(tenant="a", appeal_id=appeal.appeal_id, outcome="reversed",
                                                          reviewer="rev-7", text="a quote", labels=labels), metadata=scoped)
        code, details = await status_of(bad)
        assert code == grpc.StatusCode.INVALID_ARGUMENT and details.startswith(message)
    # an earlier reviewer's label of the item: the outcome's labels merge into it
    await stub.SubmitLabels(apb.SubmitLabelsRequest(tenant="a", items=[apb.LabelledItem(
        item_id="m-1", text="he called me a total idiot, look", labels={"hate": False}, reviewer="rev-1",
        labelled_at=time.time() - 30)]), metadata=scoped)
    done = await stub.ResolveAppeal(apb.ResolveAppealRequest(
        tenant="a", appeal_id=appeal.appeal_id, outcome="reversed", reviewer="rev-7",
        text="he called me a total idiot, look", labels={"harassment": False, "profanity": True}), metadata=scoped)
    assert done.status == "reversed" and done.labelled
    # the command line: an upheld decision labels what decided it, and named labels add to it
    common = ["--tenant", "a", "--admin", admin.address, "--admin-key", SCOPED_KEY]
    other = await appeal_of(second)
    code = await asyncio.to_thread(main, ["appeals", "resolve", other.appeal_id, "--outcome", "upheld", "--reviewer",
                                          "rev-8", "--text", "you are a total idiot", "--label", "harassment=1", *common])
    assert code == 0 and json.loads(capsys.readouterr().out)["labelled"] is True
    code = await asyncio.to_thread(main, ["appeals", "resolve", other.appeal_id, "--outcome", "upheld", "--reviewer",
                                          "rev-8", "--label", "profanity", *common])
    assert code == 2 and "--label takes CATEGORY=1 or CATEGORY=0" in capsys.readouterr().err
    exported = await stub.ExportLabels(apb.ExportLabelsRequest(tenant="a"), metadata=scoped)
    assert {(i.item_id, i.text, tuple(sorted(i.labels.items())), i.reviewer) for i in exported.items} == {
        ("m-1", "he called me a total idiot, look", (("harassment", False), ("hate", False), ("profanity", True)), "rev-7"),
        ("m-2", "you are a total idiot", (("harassment", True),), "rev-8")}
    third = record_for("a", item="m-3", at=time.time() - 60)
    admin.audit.append(third)
    derived = await stub.ResolveAppeal(apb.ResolveAppealRequest(
        tenant="a", appeal_id=(await appeal_of(third)).appeal_id, outcome="upheld", reviewer="rev-9",
        text="you are a total idiot"), metadata=scoped)
    assert derived.labelled
    stored = {i.item_id: dict(i.labels) for i in (await stub.ExportLabels(apb.ExportLabelsRequest(tenant="a"),
                                                                          metadata=scoped)).items}
    assert stored["m-3"] == {"profanity": True}
    # without text (and no content kept) the outcome is stored, and no label
    fourth = record_for("a", item="m-4", at=time.time() - 60)
    admin.audit.append(fourth)
    plain = await stub.ResolveAppeal(apb.ResolveAppealRequest(tenant="a", appeal_id=(await appeal_of(fourth)).appeal_id,
                                                              outcome="reversed", reviewer="rev-7"), metadata=scoped)
    assert plain.status == "reversed" and not plain.labelled
    assert "m-4" not in {i.item_id for i in (await stub.ExportLabels(apb.ExportLabelsRequest(tenant="a"),
                                                                     metadata=scoped)).items}


async def test_a_label_may_name_its_review_task_instead_of_the_text(admin: AdminApi) -> None:
    from tests.unit.router.control.test_audit import TEXT, record_for

    stub, scoped = admin.stub, admin_key(SCOPED_KEY)
    kept = record_for("a", item="m-1", include_content=True, at=time.time() - 60)
    bare = record_for("a", item="m-2", at=time.time() - 60)
    theirs = record_for("b", item="b-1", include_content=True, at=time.time() - 60)
    for record in (kept, bare, theirs):
        admin.audit.append(record)
    appeal = await stub.SubmitAppeal(apb.SubmitAppealRequest(tenant="a", audit_id=kept.audit_id, appellant="u"),
                                     metadata=scoped)
    done = await stub.SubmitLabels(apb.SubmitLabelsRequest(tenant="a", items=[
        apb.LabelledItem(task_id=kept.audit_id, labels={"harassment": True}, reviewer="rev-1"),
        apb.LabelledItem(item_id="own-id", task_id=f"appeal:{appeal.appeal_id}", labels={"hate": False}),
        apb.LabelledItem(item_id="m-9", text="sent text", task_id=bare.audit_id, labels={"spam": False})]),
        metadata=scoped)
    assert done.added == 3
    exported = {i.item_id: (i.text, dict(i.labels)) for i in
                (await stub.ExportLabels(apb.ExportLabelsRequest(tenant="a"), metadata=scoped)).items}
    assert exported == {"m-1": (TEXT, {"harassment": True}), "own-id": (TEXT, {"hate": False}),
                        "m-9": ("sent text", {"spam": False})}
    for task_id, message in ((bare.audit_id, "items[0].text: the decision of task"),
                             (theirs.audit_id, "items[0].task_id: no decision of task"),  # another tenant's: not found
                             ("appeal:nope", "items[0].task_id: no decision of task"),
                             ("", "items[0].task_id: a review task's id")):
        refused = stub.SubmitLabels(apb.SubmitLabelsRequest(tenant="a", items=[
            apb.LabelledItem(task_id=task_id, labels={"hate": True})]), metadata=scoped)
        code, details = await status_of(refused)
        assert code == grpc.StatusCode.INVALID_ARGUMENT and details.startswith(message), details
    assert theirs.content and TEXT not in details


async def test_a_removed_tenant_is_purged_and_no_other(admin: AdminApi, capsys: pytest.CaptureFixture[str]) -> None:
    import yaml

    from services.cli import main
    from tests.unit.router.control.test_audit import record_for

    stub, root, scoped = admin.stub, admin_key(ROOT_KEY), admin_key(SCOPED_KEY)
    for tenant in ("a", "b"):
        record = record_for(tenant, item=f"{tenant}-1", at=time.time() - 60)
        admin.audit.append(record)
        admin.reviews.offer(record, "review")
        await stub.SubmitLabels(apb.SubmitLabelsRequest(tenant=tenant, items=[
            apb.LabelledItem(item_id=f"{tenant}-1", text="t", labels={"hate": True})]), metadata=root)
        await stub.SubmitAppeal(apb.SubmitAppealRequest(tenant=tenant, audit_id=record.audit_id, appellant="u"),
                                metadata=root)
    admin.reviews.flush()
    assert await status_of(stub.PurgeTenant(apb.PurgeTenantRequest(tenant="b"), metadata=root)) == (
        grpc.StatusCode.FAILED_PRECONDITION, "tenant: 'b' is in the active tenants version; remove it from the tenants "
        "file (PutVersion TENANTS) before purging its data")
    current = yaml.safe_load((await stub.GetVersion(apb.GetVersionRequest(kind=apb.TENANTS), metadata=root)).content)
    current["tenants"] = [t for t in current["tenants"] if t["id"] != "b"]
    current["version"] = "without-b"
    await stub.PutVersion(apb.PutVersionRequest(kind=apb.TENANTS, content=yaml.safe_dump(current), activate=True),
                          metadata=root)
    assert (await status_of(stub.PurgeTenant(apb.PurgeTenantRequest(tenant="b"), metadata=scoped)))[0] == \
        grpc.StatusCode.PERMISSION_DENIED  # a key scoped to some tenants cannot purge
    code = await asyncio.to_thread(main, ["tenants", "purge", "b", "--admin", admin.address, "--admin-key", ROOT_KEY])
    assert code == 0 and json.loads(capsys.readouterr().out) == {"labels": "1", "appeals": "1", "review_tasks": "2",
                                                                  "audit_records": "1"}
    assert admin.audit.query("b")[0] == [] and admin.reviews.pending("b") == 0
    assert not (await stub.ExportLabels(apb.ExportLabelsRequest(tenant="b"), metadata=root)).items
    # tenant a keeps everything
    assert len(admin.audit.query("a")[0]) == 1 and admin.reviews.pending("a") == 2
    assert len((await stub.ExportLabels(apb.ExportLabelsRequest(tenant="a"), metadata=root)).items) == 1


async def test_a_statement_names_the_tenants_own_redress(admin: AdminApi) -> None:
    import yaml

    from tests.unit.router.control.test_audit import record_for

    root = admin_key(ROOT_KEY)
    current = yaml.safe_load((await admin.stub.GetVersion(apb.GetVersionRequest(kind=apb.TENANTS), metadata=root)).content)
    next(t for t in current["tenants"] if t["id"] == "a")["redress"] = "Appeal in the app: Settings > My content > Appeal"
    current["version"] = "with-redress"
    await admin.stub.PutVersion(apb.PutVersionRequest(kind=apb.TENANTS, content=yaml.safe_dump(current), activate=True),
                                metadata=root)
    mine, theirs = record_for("a", at=time.time() - 60), record_for("b", at=time.time() - 60)
    admin.audit.append(mine)
    admin.audit.append(theirs)
    own = await admin.stub.GetStatementOfReasons(apb.GetStatementOfReasonsRequest(tenant="a", audit_id=mine.audit_id),
                                                 metadata=root)
    other = await admin.stub.GetStatementOfReasons(apb.GetStatementOfReasonsRequest(tenant="b", audit_id=theirs.audit_id),
                                                   metadata=root)
    assert own.redress == "Appeal in the app: Settings > My content > Appeal"
    assert other.redress.startswith("internal complaint handling")  # b gave none: the default
    current["tenants"][0]["redress"] = "x" * 2001
    current["version"] = "too-long"
    refused = admin.stub.PutVersion(apb.PutVersionRequest(kind=apb.TENANTS, content=yaml.safe_dump(current)), metadata=root)
    code, message = await status_of(refused)
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "redress: at most 2000 printable characters" in message


async def test_an_image_label_banks_the_image_for_its_tenant_and_a_reversal_takes_it_out(admin: AdminApi,
                                                                                          tmp_path: Path) -> None:
    import io

    from PIL import Image

    from services.match.banks import LoadedBanks
    from services.match.matcher import match_image
    from services.match.signals import image_signals
    from services.router.control.image_labels import reviewed_bank_name
    from tests.unit.match.conftest import photo_bytes, rgb, variants

    assert admin.banks is not None
    photo = photo_bytes("coffee.png")
    stub = admin.stub
    harmful = apb.LabelledItem(item_id="img-1", image=photo, labels={"violence": True}, reviewer="rev-2")
    done = await stub.SubmitLabels(apb.SubmitLabelsRequest(tenant="a", items=[harmful]), metadata=admin_key(SCOPED_KEY))
    assert (done.banked, done.added, done.tenant_total) == (3, 0, 0)  # PDQ, MD5, SHA-256; no text: not a text label
    name = reviewed_bank_name("a", "violence")
    spec, _ = admin.banks.bank(name) or (None, 0)
    assert spec is not None and (spec.owner, spec.category, spec.action) == ("a", "violence", "block")
    repost = variants(photo)["jpeg_60"]
    banks = LoadedBanks.load(admin.banks)
    assert [(m.bank, m.content_id) for m in match_image(banks.visible_to("a"), image_signals(repost, rgb(repost)))] == [
        (name, "img-1")]
    assert match_image(banks.visible_to("b"), image_signals(repost, rgb(repost))) == []  # never another tenant's
    # with a text: the text label is stored as well
    both = apb.LabelledItem(item_id="img-2", text="look at this", image=photo, labels={"violence": True})
    again = await stub.SubmitLabels(apb.SubmitLabelsRequest(tenant="a", items=[both]), metadata=admin_key(SCOPED_KEY))
    assert (again.added, again.banked) == (1, 3)  # sent again (a hash banked twice is one hash)
    assert sum(admin.banks.counts(name).values()) == 3
    # a reversal made with another copy of the image takes out what the item banked
    cleared = apb.LabelledItem(item_id="img-1", image=repost, labels={"violence": False})
    undone = await stub.SubmitLabels(apb.SubmitLabelsRequest(tenant="a", items=[cleared]), metadata=admin_key(SCOPED_KEY))
    assert undone.unbanked == 3 and admin.banks.counts(name) == {}
    # an image whose header reads well but whose pixels do not decode, beside a good text label: refused by its
    # place in the call, and nothing of the call is stored
    buffer = io.BytesIO()
    Image.new("RGB", (64, 64), (200, 10, 10)).save(buffer, "PNG")
    truncated = buffer.getvalue()[:60]
    good = apb.LabelledItem(item_id="txt-9", text="a caption", labels={"spam": False})
    bad = apb.LabelledItem(item_id="img-3", image=truncated, labels={"violence": True})
    code, message = await status_of(stub.SubmitLabels(apb.SubmitLabelsRequest(tenant="a", items=[good, bad]),
                                                       metadata=admin_key(SCOPED_KEY)))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and message.startswith("items[1].image:"), message
    exported = await stub.ExportLabels(apb.ExportLabelsRequest(tenant="a"), metadata=admin_key(ROOT_KEY))
    assert [i.item_id for i in exported.items] == ["img-2"] and admin.banks.counts(name) == {}
    # an image-only item is checked like any other, named by its place in the call
    unnamed = apb.LabelledItem(item_id="", image=photo, labels={"violence": True})
    assert (await status_of(stub.SubmitLabels(apb.SubmitLabelsRequest(tenant="a", items=[good, unnamed]),
                                              metadata=admin_key(SCOPED_KEY))))[1].startswith("items[1].item_id:")
    # a key scoped to tenant a cannot bank images for tenant b, nor send more images than the bound
    other = apb.LabelledItem(item_id="img-4", image=photo, labels={"violence": True})
    assert (await status_of(stub.SubmitLabels(apb.SubmitLabelsRequest(tenant="b", items=[other]),
                                              metadata=admin_key(SCOPED_KEY))))[0] == grpc.StatusCode.PERMISSION_DENIED
    assert admin.banks.bank(reviewed_bank_name("b", "violence")) is None
    flood = [apb.LabelledItem(item_id=f"img-{i}", image=truncated, labels={"violence": True}) for i in range(65)]
    assert (await status_of(stub.SubmitLabels(apb.SubmitLabelsRequest(tenant="a", items=flood),
                                              metadata=admin_key(SCOPED_KEY))))[0] == grpc.StatusCode.RESOURCE_EXHAUSTED
    # BankAdmin keeps the reviewed banks' names
    assert name.startswith("reviewed-")


async def test_an_image_label_without_a_bank_store_is_refused(tmp_path: Path) -> None:
    from tests.unit.match.conftest import photo_bytes

    async with admin_api(tmp_path, [AdminKey("root", hash_key(ROOT_KEY))], with_banks=False) as api:
        item = apb.LabelledItem(item_id="img-1", image=photo_bytes("coffee.png"), labels={"violence": True})
        assert await status_of(api.stub.SubmitLabels(apb.SubmitLabelsRequest(tenant="a", items=[item]),
                                                     metadata=admin_key(ROOT_KEY))) == (
            grpc.StatusCode.FAILED_PRECONDITION, "items[].image: this router has no bank store for image labels "
                                                 "(lifecycle.banks_path)")


def test_reviewed_bank_names_are_one_per_tenant_and_category_and_always_valid() -> None:
    from services.match.banks import BankSpec
    from services.router.control.image_labels import reviewed_bank_name

    tenants = ["acme", "Acme", "_acme", "-x", "élan", "T" * 36 + "-0000-4000-8000-ABCDEFABCDEF"]
    categories = ["violence", "spam", "custom.crypto_scam", "custom.crypto_pump", "custom." + "x" * 60]
    names = {reviewed_bank_name(t, c) for t in tenants for c in categories}
    assert len(names) == len(tenants) * len(categories)  # no two pairs share a bank
    for name in names:
        BankSpec(name, owner="acme", category="spam")  # a valid bank name
