"""Review tasks out of a real router (issue 40): decisions become tasks that a consumer streams over the
PolicyAdmin API; a task not acked comes back after its lease, also after the router is SIGKILLed
mid-stream and started again; an acked one never does; the reviewer's label goes back in with
SubmitLabels for the task's item; another tenant's key sees none of it; an appeal of a blocked decision
goes out as its own task, is upheld with the item's text and comes back as its label, and the statement
of reasons says a person decided; `auditmesh review stream|ack` consume and ack tasks from the command line."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

import grpc
import pytest
import yaml
from auditmesh.v1 import admin_pb2 as apb
from auditmesh.v1 import admin_pb2_grpc as apb_grpc
from auditmesh.v1 import moderation_pb2 as pb
from auditmesh.v1 import moderation_pb2_grpc as pb_grpc

from services.launcher import ROOT, Mesh, free_base_port
from services.router.tenants import hash_key

pytestmark = pytest.mark.slow

ADMIN = [("x-admin-key", "demo-admin-key")]  # config/router.yaml's loopback demo admin key
KEY = "initech-review-key"
TEXTS = ["see you at lunch tomorrow", "the match starts at eight", "thanks for the help"]


def add_sampled_tenant(admin: apb_grpc.PolicyAdminStub) -> None:
    """Tenant initech: every ALLOW and BLOCK decision is sampled into a review task (besides REVIEW ones)."""
    tenants = yaml.safe_load(admin.GetVersion(apb.GetVersionRequest(kind=apb.TENANTS), metadata=ADMIN).content)
    tenants["tenants"].append({"id": "initech", "api_key_sha256": hash_key(KEY), "policies": ["default"],
                               "qos_class": "standard", "review_tasks": {"sample_allow": 1.0, "sample_block": 1.0}})
    tenants["version"] = "with-initech"
    admin.PutVersion(apb.PutVersionRequest(kind=apb.TENANTS, content=yaml.safe_dump(tenants), activate=True), metadata=ADMIN)


def open_stream(admin: apb_grpc.PolicyAdminStub, visibility_s: float) -> Any:
    """A stream of initech's review tasks (left open)."""
    return admin.StreamReviewTasks(apb.StreamReviewTasksRequest(tenant="initech", max_unacked=10,
                                                                visibility_timeout_s=visibility_s),
                                   metadata=ADMIN, timeout=60.0)


def read_tasks(stream: Any, count: int) -> list[apb.ReviewTask]:
    """The next `count` tasks of `stream` (the stream stays open)."""
    return [next(stream) for _ in range(count)]


def test_tasks_survive_a_killed_router_until_acked_and_labels_go_back() -> None:
    mesh = Mesh(base_port=free_base_port())
    router = mesh.routers[0]
    try:
        mesh.start_services(["text", router], 120.0)
        with grpc.insecure_channel(mesh.admin_address) as channel:
            admin = apb_grpc.PolicyAdminStub(channel)
            add_sampled_tenant(admin)
            with grpc.insecure_channel(mesh.address(router)) as public:
                stub = pb_grpc.ModerationServiceStub(public)
                for index, text in enumerate(TEXTS):
                    stub.Moderate(pb.ModerateRequest(item=pb.Item(id=f"m-{index}", parts=[pb.Part(text=text)])),
                                  metadata=[("x-api-key", KEY)], timeout=20.0)
            stream = open_stream(admin, visibility_s=3.0)
            first = read_tasks(stream, 3)
            assert sorted(t.record.item_id for t in first) == ["m-0", "m-1", "m-2"]
            assert {(t.reason, t.deliveries, t.record.tenant) for t in first} == {("sample_allow", 1, "initech")}
            assert all(t.task_id == t.record.audit_id and t.record.policy_name == "default" and t.record.models
                       for t in first)
            assert not list(first[0].record.content)  # no content unless the policy opts in
            acked = next(t for t in first if t.record.item_id == "m-0")
            assert admin.AckReviewTasks(apb.AckReviewTasksRequest(tenant="initech", task_ids=[acked.task_id]),
                                        metadata=ADMIN).acked == 1
            # another tenant's scope never shows them: acme has no tasks of these decisions
            acme = admin.StreamReviewTasks(apb.StreamReviewTasksRequest(tenant="acme"), metadata=ADMIN, timeout=1.5)
            with pytest.raises(grpc.RpcError) as waited:
                next(iter(acme))
            assert waited.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED

            mesh.processes[router].kill()  # mid-stream: the consumer's stream is open, two of its tasks unacked
            mesh.processes[router].wait(10.0)
            with pytest.raises(grpc.RpcError) as broken:
                next(stream)
            assert broken.value.code() == grpc.StatusCode.UNAVAILABLE
        mesh.start_service(router)
        mesh.wait_serving(router, 60.0)
        time.sleep(3.0)  # their leases end
        with grpc.insecure_channel(mesh.admin_address) as channel:
            admin = apb_grpc.PolicyAdminStub(channel)
            stream = open_stream(admin, visibility_s=30.0)
            again = read_tasks(stream, 2)
            stream.cancel()
            assert sorted((t.record.item_id, t.deliveries) for t in again) == [("m-1", 2), ("m-2", 2)]
            assert admin.AckReviewTasks(apb.AckReviewTasksRequest(tenant="initech", task_ids=[t.task_id for t in again]),
                                        metadata=ADMIN).acked == 2
            reviewed = next(t for t in again if t.record.item_id == "m-1")
            label = apb.LabelledItem(item_id=reviewed.record.item_id, text=TEXTS[1], reviewer="rev-9",
                                     labels={"spam": False, "harassment": False})
            stored = admin.SubmitLabels(apb.SubmitLabelsRequest(tenant="initech", items=[label]), metadata=ADMIN)
            assert stored.added == 1
            exported = admin.ExportLabels(apb.ExportLabelsRequest(tenant="initech"), metadata=ADMIN)
            assert [(i.item_id, i.reviewer) for i in exported.items] == [("m-1", "rev-9")]
            appeal_tasks = _an_appeal_goes_out_and_its_outcome_comes_back_as_a_label(mesh, router, admin)
            _the_review_command_streams_and_acks(mesh, router, appeal_tasks)
    finally:
        mesh.stop()


def _an_appeal_goes_out_and_its_outcome_comes_back_as_a_label(mesh: Mesh, router: str,
                                                              admin: apb_grpc.PolicyAdminStub) -> list[str]:
    """A blocked message's audit id (in the response) is appealed; the appeal goes out as its own review task,
    is upheld with the item's text, becomes the item's label, and the statement of reasons says a person
    decided. Returns the ids of the two tasks read (the decision's left leased, unacked)."""
    insult = "You are a worthless pathetic idiot and everyone hates you"
    with grpc.insecure_channel(mesh.address(router)) as public:
        blocked = pb_grpc.ModerationServiceStub(public).Moderate(
            pb.ModerateRequest(item=pb.Item(id="m-appealed", parts=[pb.Part(text=insult)])),
            metadata=[("x-api-key", KEY)], timeout=20.0)
    assert blocked.decision == pb.BLOCK and blocked.audit_id
    appeal = admin.SubmitAppeal(apb.SubmitAppealRequest(tenant="initech", audit_id=blocked.audit_id, appellant="user-5",
                                                        statement="it was a joke between friends"), metadata=ADMIN)
    stream = open_stream(admin, visibility_s=30.0)
    tasks = {t.reason: t for t in read_tasks(stream, 2)}  # the decision's sampled task and the appeal's
    stream.cancel()
    assert tasks["appeal"].task_id == f"appeal:{appeal.appeal_id}" and tasks["appeal"].appeal == appeal
    assert tasks["appeal"].record.audit_id == blocked.audit_id == tasks["sample_block"].record.audit_id
    upheld = admin.ResolveAppeal(apb.ResolveAppealRequest(tenant="initech", appeal_id=appeal.appeal_id, outcome="upheld",
                                                          reviewer="rev-3", text=insult), metadata=ADMIN)
    assert upheld.status == "upheld" and upheld.labelled
    label = next(i for i in admin.ExportLabels(apb.ExportLabelsRequest(tenant="initech"), metadata=ADMIN).items
                 if i.item_id == "m-appealed")
    acting = {c.category for c in blocked.categories if c.action == pb.BLOCK}
    assert label.text == insult and label.reviewer == "rev-3" and set(label.labels) <= acting and label.labels
    assert all(label.labels.values())
    statement = admin.GetStatementOfReasons(apb.GetStatementOfReasonsRequest(tenant="initech", audit_id=blocked.audit_id),
                                            metadata=ADMIN)
    assert not statement.automated_decision and statement.reviewed_by == "rev-3"
    assert [(a.appeal_id, a.status, a.labelled) for a in statement.appeals] == [(appeal.appeal_id, "upheld", False)]
    return [t.task_id for t in tasks.values()]  # the appeal's task was acked when the appeal was resolved


def _the_review_command_streams_and_acks(mesh: Mesh, router: str, leased: list[str]) -> None:
    """`auditmesh review stream --ack` prints a new task as one JSON line and acks it; `auditmesh review ack`
    acks the leased ones; a stream with nothing left prints nothing and ends at its --seconds."""
    with grpc.insecure_channel(mesh.address(router)) as public:
        pb_grpc.ModerationServiceStub(public).Moderate(
            pb.ModerateRequest(item=pb.Item(id="m-cli", parts=[pb.Part(text="lunch at noon?")])),
            metadata=[("x-api-key", KEY)], timeout=20.0)
    admin = ["--tenant", "initech", "--admin", mesh.admin_address, "--admin-key", "demo-admin-key"]

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([sys.executable, "-m", "services.cli", *args, *admin], capture_output=True, text=True,
                              timeout=60, cwd=ROOT)
        assert done.returncode == 0, done.stderr[-2000:]
        return done
    streamed = cli("review", "stream", "--ack", "--max", "1", "--seconds", "20")
    [line] = streamed.stdout.splitlines()
    task = json.loads(line)
    assert task["record"]["item_id"] == "m-cli" and task["reason"] == "sample_allow" and task["deliveries"] == 1
    assert "1 tasks printed, 1 acked" in streamed.stderr
    assert json.loads(cli("review", "ack", *leased).stdout) == {"acked": 1}  # the decision's: the appeal's is gone
    empty = cli("review", "stream", "--seconds", "1.5")
    assert empty.stdout == "" and "0 tasks printed" in empty.stderr
