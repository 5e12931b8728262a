"""The PolicyAdmin gRPC servicer (`protos/auditmesh/v1/admin.proto`). A thin adapter: it
authenticates the admin key (under the failed-auth throttle, `services.common.auth_guard`), checks its
tenant scope and which versions it may store and read (`admin_auth`: a scoped key writes and reads
only its tenants' `<tenant>:<id>` versions besides the shared ones), runs the operation
(`PolicyControl`, the audit store) in a worker thread, and converts the results. Errors map to a
status through `services.common.status`. Served on the router's admin port only (`admin_listen`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, AsyncIterator, Callable, TypeVar

import grpc
from auditmesh.v1 import admin_pb2 as apb
from auditmesh.v1 import admin_pb2_grpc as apb_grpc
from auditmesh.v1 import moderation_pb2 as pb

from services.common.auth_guard import AuthGuard
from services.common.auth_throttle import AuthThrottle
from services.common.errors import (FailedPreconditionError, InvalidRequestError, LimitExceededError, NotFoundError,
                                    PermissionDeniedError)
from services.common.status import call_status
from services.match.banks import BankRepository
from services.router.control.admin_auth import (AdminAuth, AdminKey, admin_key_from, check_scope_of, require_read,
                                                require_store)
from services.router.control.appeal_labels import label_item_id, resolution_label
from services.router.control.appeals import APPEAL_TASK_PREFIX, Appeal, appeal_task_id, check_appeal_id, new_appeal, resolve
from services.router.control.audit import AuditCategory, AuditRecord
from services.router.control.audit_store import AuditLog
from services.router.control.canary import CANARY_CLOCK, CanaryReport, RollbackBounds
from services.router.control.hashed_images import check_images
from services.router.control.image_labels import IMAGE_ONLY_TEXT, ImageLabel, bank_image_labels, hash_image_labels
from services.router.control.label_store import (DEFAULT_PAGE, MAX_ITEMS_PER_CALL, Label, LabelRepository, Submitted,
                                                 check_items, check_room)
from services.router.control.reasons import StatementOfReasons, statement_of_reasons
from services.router.control.task_labels import is_appeal_task, label_for_task
from services.router.control.review_queue import MAX_LEASE, MAX_VISIBILITY_S, ReviewTask, ReviewTasks
from services.router.control.control import PolicyControl
from services.router.control.versions import Kind, TENANTS_NAME, diff, unified_diff
from services.router.control.store import CanarySpec, PointerChange, StoredVersion
from services.router.messages import DECISIONS, evidence_message

log = logging.getLogger(__name__)
ADMIN_SERVICE_NAME = "auditmesh.v1.PolicyAdmin"
#: StreamReviewTasks calls one tenant may have open at once (each polls the queue).
MAX_STREAMS_PER_TENANT = 4
T = TypeVar("T")
KINDS: dict[int, Kind] = {apb.DOCUMENT_KIND_UNSPECIFIED: "policy", apb.POLICY: "policy", apb.TENANTS: "tenants"}
KIND_VALUES = {"policy": apb.POLICY, "tenants": apb.TENANTS}


async def admin_call(context: grpc.aio.ServicerContext, guard: AuthGuard, auth: AdminAuth, scope: str | None,
                     work: Callable[[AdminKey], T]) -> T:
    """One admin call: authenticate the admin key (under the failed-auth throttle); check `scope` (a tenant,
    "" = all tenants, None = no tenant check); run `work` in a worker thread; map errors to statuses."""
    async with call_status(context, log):
        metadata = context.invocation_metadata()
        key = guard.check(context.peer(), lambda: auth.authenticate(admin_key_from(metadata)))
        if scope is not None:
            auth.require(key, scope)
        return await asyncio.to_thread(work, key)
    raise AssertionError("unreachable: call_status ends the call on error")


class PolicyAdminServicer(apb_grpc.PolicyAdminServicer):
    def __init__(self, control: PolicyControl, audit: AuditLog, auth: AdminAuth, *,
                 guard: AuthGuard | None = None, labels: LabelRepository | None = None,
                 reviews: ReviewTasks | None = None, banks: BankRepository | None = None, poll_s: float = 0.2) -> None:
        self.control = control
        self.audit = audit
        self.auth = auth
        #: Reviewers' labels (SubmitLabels / ExportLabels); None: those calls answer FAILED_PRECONDITION.
        self.labels = labels
        #: Review tasks (StreamReviewTasks / AckReviewTasks); None: those calls answer FAILED_PRECONDITION.
        self.reviews = reviews
        #: The bank store reviewers' image labels go to (services/router/control/image_labels.py); None: an
        #: image label answers FAILED_PRECONDITION.
        self.banks = banks
        #: How often an open StreamReviewTasks looks for new tasks and ended leases.
        self.poll_s = poll_s
        #: Open StreamReviewTasks calls per tenant (at most MAX_STREAMS_PER_TENANT each).
        self._streams: dict[str, int] = {}
        #: The failed-auth throttle (the router's main.py gives it one counted in its metrics).
        self.guard = guard or AuthGuard(AuthThrottle(), surface="admin")

    async def _run(self, context: grpc.aio.ServicerContext, scope: str | None, work: Callable[[AdminKey], T]) -> T:
        return await admin_call(context, self.guard, self.auth, scope, work)

    @staticmethod
    def _doc(kind_value: int, name: str) -> tuple[Kind, str]:
        kind = KINDS.get(kind_value)
        if kind is None:
            raise InvalidRequestError(f"kind: unknown document kind {kind_value}")
        if kind == "tenants":
            return kind, TENANTS_NAME
        if not name:
            raise InvalidRequestError("name: the policy name is required")
        return kind, name

    def _scope_for_kind(self, kind_value: int) -> str | None:
        """The tenants document (it holds every tenant's key digest) needs a global key."""
        return "" if KINDS.get(kind_value) == "tenants" else None

    async def PutVersion(self, request: apb.PutVersionRequest, context: grpc.aio.ServicerContext) -> apb.VersionInfo:
        scope = "" if request.activate else self._scope_for_kind(request.kind)

        def work(key: AdminKey) -> apb.VersionInfo:
            kind, name = self._doc(request.kind, request.name)
            author = f"{request.author} (admin key {key.name})" if request.author else f"admin key {key.name}"
            if kind == "policy":  # which version ids this key may store (admin_auth)
                require_store(key, self.control.parse(kind, request.content, name=name).version)
            stored = self.control.put(kind, request.content, name="" if kind == "tenants" else name, author=author,
                                      comment=request.comment)
            if request.activate:
                check_scope_of(stored.version, "")
                self.control.activate(kind, stored.name, stored.version, "", author=author, reason=request.comment or "put+activate")
            return self._info(stored, key)
        return await self._run(context, scope, work)

    async def GetVersion(self, request: apb.GetVersionRequest, context: grpc.aio.ServicerContext) -> apb.DocumentVersion:
        def work(key: AdminKey) -> apb.DocumentVersion:
            kind, name = self._doc(request.kind, request.name)
            require_read(key, request.version)
            stored = self.control.get(kind, name, request.version, request.tenant)
            require_read(key, stored.version)
            return apb.DocumentVersion(info=self._info(stored, key), content=stored.content)
        scope = self._scope_for_kind(request.kind)
        return await self._run(context, request.tenant if request.tenant and scope is None else scope, work)

    async def ListVersions(self, request: apb.ListVersionsRequest, context: grpc.aio.ServicerContext) -> apb.ListVersionsResponse:
        def work(key: AdminKey) -> apb.ListVersionsResponse:
            kind = KINDS.get(request.kind, "policy")
            versions = self.control.store.list_versions(kind, TENANTS_NAME if kind == "tenants" else request.name)
            readable = [v for v in versions if _readable(key, v.version)]
            return apb.ListVersionsResponse(versions=[self._info(v, key) for v in readable])
        return await self._run(context, self._scope_for_kind(request.kind), work)

    async def DiffVersions(self, request: apb.DiffVersionsRequest, context: grpc.aio.ServicerContext) -> apb.DiffVersionsResponse:
        def work(key: AdminKey) -> apb.DiffVersionsResponse:
            kind, name = self._doc(request.kind, request.name)
            require_read(key, request.from_version)
            require_read(key, request.to_version)
            before = self.control.parse(kind, self.control.get(kind, name, request.from_version).content, name=name)
            after = self.control.parse(kind, self.control.get(kind, name, request.to_version).content, name=name)
            changes = [apb.Change(path=c.path, op=c.op, from_value=c.before, to_value=c.after) for c in diff(before, after)]
            return apb.DiffVersionsResponse(changes=changes, unified_diff=unified_diff(before, after))
        return await self._run(context, self._scope_for_kind(request.kind), work)

    async def Activate(self, request: apb.ActivateRequest, context: grpc.aio.ServicerContext) -> apb.ActivationResponse:
        def work(key: AdminKey) -> apb.ActivationResponse:
            kind, name = self._doc(request.kind, request.name)
            check_scope_of(request.version, request.tenant)
            change = self.control.activate(kind, name, request.version, request.tenant, author=f"admin key {key.name}",
                                           reason=request.comment or "activate")
            return self._activation(change)
        return await self._run(context, request.tenant, work)

    async def Rollback(self, request: apb.RollbackRequest, context: grpc.aio.ServicerContext) -> apb.ActivationResponse:
        def work(key: AdminKey) -> apb.ActivationResponse:
            kind, name = self._doc(request.kind, request.name)
            check_scope_of(request.to_version, request.tenant)
            change = self.control.rollback(kind, name, request.tenant, request.to_version, author=f"admin key {key.name}")
            return self._activation(change)
        return await self._run(context, request.tenant, work)

    async def StartCanary(self, request: apb.StartCanaryRequest, context: grpc.aio.ServicerContext) -> apb.CanaryStatus:
        def work(key: AdminKey) -> CanarySpec:
            bounds = self._bounds(request.bounds)
            check_scope_of(request.candidate_version, request.tenant)
            return self.control.start_canary(request.policy, request.tenant, request.candidate_version, request.percent,
                                             shadow=request.shadow, bounds=bounds, author=f"admin key {key.name}")
        return self._status(await self._run(context, request.tenant, work))

    async def StopCanary(self, request: apb.StopCanaryRequest, context: grpc.aio.ServicerContext) -> apb.CanaryStatus:
        def work(key: AdminKey) -> CanarySpec:
            return self.control.stop_canary(request.policy, request.tenant, promote=request.promote,
                                            author=f"admin key {key.name}", reason=request.comment)
        return self._status(await self._run(context, request.tenant, work))

    async def GetCanary(self, request: apb.GetCanaryRequest, context: grpc.aio.ServicerContext) -> apb.CanaryStatus:
        def work(key: AdminKey) -> CanarySpec:
            return self.control.canary_spec(request.policy, request.tenant)
        return self._status(await self._run(context, request.tenant, work))

    async def QueryAudit(self, request: apb.QueryAuditRequest, context: grpc.aio.ServicerContext) -> apb.QueryAuditResponse:
        if not request.tenant:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "tenant: required; audit records are read one tenant at a time")

        def work(key: AdminKey) -> tuple[list[AuditRecord], str]:
            return self.audit.query(request.tenant, since=request.since, until=request.until, limit=request.limit,
                                    page_token=request.page_token)
        records, token = await self._run(context, request.tenant, work)
        return apb.QueryAuditResponse(records=[audit_message(r) for r in records], next_page_token=token)

    async def SubmitLabels(self, request: apb.SubmitLabelsRequest, context: grpc.aio.ServicerContext) -> apb.SubmitLabelsResponse:
        if not request.tenant:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "tenant: required; labels are stored one tenant at a time")
        # an item with an image and neither text nor task is banked only (the label store holds texts)
        image_only = {index for index, i in enumerate(request.items) if i.image and not i.text and not i.task_id}
        everything = [Label(i.item_id, IMAGE_ONLY_TEXT if index in image_only else i.text,
                            {c: int(v) for c, v in i.labels.items()}, i.reviewer, i.labelled_at)
                      for index, i in enumerate(request.items)]
        images = [ImageLabel(f"items[{index}]", i.item_id, i.image, dict(i.labels))
                  for index, i in enumerate(request.items) if i.image]

        def work(key: AdminKey) -> tuple[Submitted, int, int]:
            if request.tenant not in self.control.runtime.snapshot.tenants.tenants:
                raise NotFoundError(f"tenant: no tenant {request.tenant!r} in the active tenants version")
            store = self._label_store()
            if images and self.banks is None:
                raise FailedPreconditionError("items[].image: this router has no bank store for image labels "
                                              "(lifecycle.banks_path)")
            labelled = list(everything)
            if len(labelled) > MAX_ITEMS_PER_CALL:
                check_items(labelled)  # refused by its size, before any audit record is read
            for index, i in enumerate(request.items):  # labels naming their review task: the decision's kept text
                if not i.text and index not in image_only:
                    record = self.audit.get(request.tenant, self._decision_of(request.tenant, i.task_id)) if i.task_id else None
                    labelled[index] = label_for_task(labelled[index], record, i.task_id, f"items[{index}]")
            check_items(labelled)  # every item, named by its place in the call, before anything is stored
            check_images([(f"{label.field}.image", label.image) for label in images], "items")
            hashed = hash_image_labels(images)  # and every image decoded
            texts = [label for index, label in enumerate(labelled) if index not in image_only]
            # images first: a call that fails after them is safe to send again (a hash banked twice is one hash)
            banked, unbanked = bank_image_labels(self.banks, request.tenant, hashed) if self.banks is not None else (0, 0)
            submitted = store.submit(request.tenant, texts) if texts else Submitted(0, 0, store.count(request.tenant))
            return submitted, banked, unbanked
        done, banked, unbanked = await self._run(context, request.tenant, work)
        return apb.SubmitLabelsResponse(added=done.added, replaced=done.replaced, tenant_total=done.tenant_total,
                                        banked=banked, unbanked=unbanked)

    async def DeleteLabels(self, request: apb.DeleteLabelsRequest, context: grpc.aio.ServicerContext) -> apb.DeleteLabelsResponse:
        if not request.tenant:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "tenant: required; labels are deleted one tenant at a time")

        def work(key: AdminKey) -> tuple[int, int]:
            store = self._label_store()
            deleted = store.delete(request.tenant, list(request.item_ids))
            log.info("labels of %d items of tenant %s deleted by admin key %s", deleted, request.tenant, key.name)
            return deleted, store.count(request.tenant)
        deleted, total = await self._run(context, request.tenant, work)
        return apb.DeleteLabelsResponse(deleted=deleted, tenant_total=total)

    async def ExportLabels(self, request: apb.ExportLabelsRequest, context: grpc.aio.ServicerContext) -> apb.ExportLabelsResponse:
        if not request.tenant:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "tenant: required; labels are read one tenant at a time")

        def work(key: AdminKey) -> tuple[list[Label], str]:
            return self._label_store().page(request.tenant, limit=request.limit or DEFAULT_PAGE, page_token=request.page_token)
        labels, token = await self._run(context, request.tenant, work)
        return apb.ExportLabelsResponse(items=[apb.LabelledItem(item_id=l.item_id, text=l.text,
                                                                labels={c: bool(v) for c, v in l.labels.items()},
                                                                reviewer=l.reviewer, labelled_at=l.labelled_at)
                                               for l in labels], next_page_token=token)

    async def StreamReviewTasks(self, request: apb.StreamReviewTasksRequest,
                                context: grpc.aio.ServicerContext) -> AsyncIterator[apb.ReviewTask]:
        """Lease and send the tenant's tasks while the stream is open (see admin.proto)."""
        async with call_status(context, log):
            key = self.guard.check(context.peer(), lambda: self.auth.authenticate(admin_key_from(context.invocation_metadata())))
            if not request.tenant:
                raise InvalidRequestError("tenant: required; review tasks are read one tenant at a time")
            self.auth.require(key, request.tenant)
            if request.tenant not in self.control.runtime.snapshot.tenants.tenants:
                raise NotFoundError(f"tenant: no tenant {request.tenant!r} in the active tenants version")
            if self._streams.get(request.tenant, 0) >= MAX_STREAMS_PER_TENANT:
                raise LimitExceededError(f"tenant {request.tenant!r} has {MAX_STREAMS_PER_TENANT} review-task streams open, "
                                         f"the most it may; close one or consume from fewer")
            window = request.max_unacked or 100
            visibility = request.visibility_timeout_s or 60.0
            if not 1 <= window <= MAX_LEASE:
                raise InvalidRequestError(f"max_unacked: must be 1..{MAX_LEASE}, got {window}")
            if not 0.0 < visibility <= MAX_VISIBILITY_S:
                raise InvalidRequestError(f"visibility_timeout_s: must be in (0, {MAX_VISIBILITY_S:g}], got {visibility:g}")
            queue = self._review_queue()
            out: list[str] = []  # this stream's tasks still leased (delivered, not acked, lease not over)
            self._streams[request.tenant] = self._streams.get(request.tenant, 0) + 1
            try:
                while True:
                    if out:
                        live = await asyncio.to_thread(queue.leased, request.tenant, out)
                        out = [task_id for task_id in out if task_id in live]
                    room = window - len(out)
                    tasks = await asyncio.to_thread(queue.lease, request.tenant, limit=room, visibility_s=visibility) if room else []
                    appeals = await asyncio.to_thread(self._appeals_of_tasks, request.tenant, tasks)
                    for task in tasks:
                        out.append(task.task_id)
                        yield review_task_message(task, appeals.get(task.task_id))
                    if len(tasks) < room or not room:
                        await asyncio.sleep(self.poll_s)
            finally:
                self._streams[request.tenant] -= 1

    async def AckReviewTasks(self, request: apb.AckReviewTasksRequest, context: grpc.aio.ServicerContext) -> apb.AckReviewTasksResponse:
        if not request.tenant:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "tenant: required; review tasks are acked one tenant at a time")

        def work(key: AdminKey) -> int:
            return self._review_queue().ack(request.tenant, list(request.task_ids))
        return apb.AckReviewTasksResponse(acked=await self._run(context, request.tenant, work))

    async def GetStatementOfReasons(self, request: apb.GetStatementOfReasonsRequest,
                                    context: grpc.aio.ServicerContext) -> apb.StatementOfReasons:
        if not request.tenant:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "tenant: required; decisions are read one tenant at a time")
        if not request.audit_id:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "audit_id: required; the id of the decision's audit record")

        def work(key: AdminKey) -> StatementOfReasons:
            record = self.audit.get(request.tenant, request.audit_id)
            if record is None:
                raise NotFoundError(f"audit_id: no decision {request.audit_id!r} of tenant {request.tenant!r} is kept "
                                    f"(another tenant's, never made, or past the audit log's retention)")
            appeals = tuple(self.labels.appeals_of(request.tenant, record.audit_id)) if self.labels is not None else ()
            tenant = self.control.runtime.snapshot.tenants.tenants.get(request.tenant)
            return statement_of_reasons(record, appeals=appeals, redress=tenant.redress if tenant else "")
        return statement_message(await self._run(context, request.tenant, work))

    async def SubmitAppeal(self, request: apb.SubmitAppealRequest, context: grpc.aio.ServicerContext) -> apb.Appeal:
        if not request.tenant:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "tenant: required; appeals are stored one tenant at a time")
        if not request.audit_id:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "audit_id: required; the id of the decision appealed")

        def work(key: AdminKey) -> Appeal:
            store, queue = self._label_store(), self._review_queue()
            record = self.audit.get(request.tenant, request.audit_id)
            if record is None:
                raise NotFoundError(f"audit_id: no decision {request.audit_id!r} of tenant {request.tenant!r} is kept "
                                    f"(another tenant's, never made, or past the audit log's retention)")
            appeal = new_appeal(request.tenant, record, appellant=request.appellant, statement=request.statement,
                                now=time.time())
            # The task is written before the appeal is stored, and both before the answer: an appeal the caller
            # was told about is never one no reviewer will see (a refused write answers an error instead).
            queue.put(record, "appeal", appeal_task_id(appeal.appeal_id), appeal.submitted_at)
            store.add_appeal(appeal)
            log.info("appeal %s of decision %s (tenant %s) submitted by admin key %r", appeal.appeal_id, record.audit_id,
                     request.tenant, key.name)
            return appeal
        return appeal_message(await self._run(context, request.tenant, work))

    async def ResolveAppeal(self, request: apb.ResolveAppealRequest, context: grpc.aio.ServicerContext) -> apb.Appeal:
        if not request.tenant:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "tenant: required; appeals are resolved one tenant at a time")

        def work(key: AdminKey) -> tuple[Appeal, bool]:
            check_appeal_id(request.appeal_id)
            store = self._label_store()
            appeal = store.get_appeal(request.tenant, request.appeal_id)
            if appeal is None:
                raise NotFoundError(f"appeal_id: no appeal {request.appeal_id!r} of tenant {request.tenant!r}")
            resolved = resolve(appeal, request.outcome, reviewer=request.reviewer, note=request.note, now=time.time())
            # The label is checked (fields, and room in the tenant's store) before anything is stored, and
            # stored after the resolution: two reviewers racing never leave the loser's label beside the
            # winner's outcome.
            label = resolution_label(resolved, self.audit.get(request.tenant, resolved.audit_id), text=request.text,
                                     labels=dict(request.labels))
            if label is not None and store.label_of(request.tenant, label_item_id(resolved)) is None:
                check_room(request.tenant, store.count(request.tenant), 1, store.max_per_tenant)
            store.save_resolution(resolved)
            if self.reviews is not None:  # its task is done: no reviewer is handed it again
                self.reviews.ack(request.tenant, [appeal_task_id(resolved.appeal_id)])
            log.info("appeal %s of decision %s (tenant %s) %s by %r", resolved.appeal_id, resolved.audit_id,
                     request.tenant, resolved.status, resolved.reviewer)
            # merged into the item's label in the store's own transaction (False: a later label of the item stands)
            return resolved, label is not None and store.merge(request.tenant, label)
        resolved, labelled = await self._run(context, request.tenant, work)
        answer = appeal_message(resolved)
        answer.labelled = labelled
        return answer

    async def PurgeTenant(self, request: apb.PurgeTenantRequest, context: grpc.aio.ServicerContext) -> apb.PurgeTenantResponse:
        if not request.tenant:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "tenant: required; the id of a tenant removed from the "
                                                                  "tenants file")

        def work(key: AdminKey) -> apb.PurgeTenantResponse:
            if request.tenant in self.control.runtime.snapshot.tenants.tenants:
                raise FailedPreconditionError(f"tenant: {request.tenant!r} is in the active tenants version; remove it from "
                                              f"the tenants file (PutVersion TENANTS) before purging its data")
            labels, appeals = self.labels.purge_tenant(request.tenant) if self.labels is not None else (0, 0)
            tasks = self.reviews.purge_tenant(request.tenant) if self.reviews is not None else 0
            records = self.audit.purge_tenant(request.tenant)
            log.warning("tenant %r purged by admin key %r: %d labels, %d appeals, %d review tasks, %d audit records",
                        request.tenant, key.name, labels, appeals, tasks, records)
            return apb.PurgeTenantResponse(labels=labels, appeals=appeals, review_tasks=tasks, audit_records=records)
        return await self._run(context, "", work)  # "": a global key only

    def _decision_of(self, tenant: str, task_id: str) -> str:
        """The audit id of review task `task_id`'s decision: the task id itself, or an appeal's decision."""
        if not is_appeal_task(task_id):
            return task_id
        appeal = self.labels.get_appeal(tenant, task_id[len(APPEAL_TASK_PREFIX):]) if self.labels is not None else None
        return appeal.audit_id if appeal is not None else ""

    def _appeals_of_tasks(self, tenant: str, tasks: list[ReviewTask]) -> dict[str, Appeal]:
        """The appeals the appeal tasks among `tasks` are about, by task id (an appeal deleted since is left out)."""
        found: dict[str, Appeal] = {}
        for task in tasks:
            if task.task_id.startswith(APPEAL_TASK_PREFIX) and self.labels is not None:
                appeal = self.labels.get_appeal(tenant, task.task_id[len(APPEAL_TASK_PREFIX):])
                if appeal is not None:
                    found[task.task_id] = appeal
        return found

    def _review_queue(self) -> ReviewTasks:
        if self.reviews is None:
            raise FailedPreconditionError("this router keeps no review tasks (no review-task queue is open)")
        return self.reviews

    def _label_store(self) -> LabelRepository:
        if self.labels is None:
            raise FailedPreconditionError("this router keeps no labels (no label store is open)")
        return self.labels

    # -- conversions -------------------------------------------------------------------------------

    def _info(self, stored: StoredVersion, key: AdminKey) -> apb.VersionInfo:
        """The version's metadata; `active_in` lists only the scopes `key` covers (and the global one)."""
        active = [p.scope for p in self.control.store.pointers()
                  if (p.kind, p.name, p.version) == (stored.kind, stored.name, stored.version)
                  and (not p.scope or key.covers(p.scope))]
        return apb.VersionInfo(kind=KIND_VALUES[stored.kind], name=stored.name, version=stored.version, author=stored.author,
                               comment=stored.comment, created_at=stored.created_at, content_hash=stored.content_hash,
                               active_in=active)

    def _activation(self, change: PointerChange) -> apb.ActivationResponse:
        return apb.ActivationResponse(kind=KIND_VALUES[change.kind], name=change.name, tenant=change.scope,
                                      version=change.version, previous_version=change.previous,
                                      generation=max(self.control.runtime.snapshot.generation, 0))

    def _bounds(self, bounds: apb.CanaryBounds) -> RollbackBounds:
        default = self.control.default_bounds
        try:
            return RollbackBounds(bounds.max_block_rate_delta or default.max_block_rate_delta,
                                  bounds.max_error_rate_delta or default.max_error_rate_delta,
                                  bounds.min_samples or default.min_samples, bounds.window_s or default.window_s,
                                  bounds.max_decision_disagreement_rate or default.max_decision_disagreement_rate)
        except ValueError as error:
            raise InvalidRequestError(f"bounds: {error}") from None

    def _status(self, spec: CanarySpec) -> apb.CanaryStatus:
        """Runs on the event loop (the monitor is updated there)."""
        monitor = self.control.runtime.monitor(spec)
        report = monitor.report(CANARY_CLOCK(), fleet=True) if monitor is not None else None
        bounds = spec.bounds
        status = apb.CanaryStatus(
            policy=spec.policy, tenant=spec.scope, baseline_version=spec.baseline, candidate_version=spec.candidate,
            percent=spec.percent, shadow=spec.shadow, running=spec.running and not (monitor and monitor.rolled_back),
            stopped_reason=spec.stopped_reason or (f"auto-rollback: {monitor.rolled_back}" if monitor and monitor.rolled_back else ""),
            bounds=apb.CanaryBounds(max_block_rate_delta=bounds.max_block_rate_delta,
                                    max_error_rate_delta=bounds.max_error_rate_delta, min_samples=bounds.min_samples,
                                    window_s=bounds.window_s,
                                    max_decision_disagreement_rate=bounds.max_decision_disagreement_rate))
        if report is not None:
            _fill_report(status, report)
        return status


def _readable(key: AdminKey, version: str) -> bool:
    try:
        require_read(key, version)
        return True
    except PermissionDeniedError:
        return False


def _fill_report(status: apb.CanaryStatus, report: CanaryReport) -> None:
    for arm, counts in (("baseline", report.baseline), ("candidate", report.candidate)):
        getattr(status, arm).CopyFrom(apb.ArmStats(items=counts.items, blocked=counts.blocked, errors=counts.errors,
                                                   block_rate=counts.block_rate, error_rate=counts.error_rate))
    shadow = report.shadow
    status.shadow_items, status.decision_disagreements = shadow.items, shadow.decisions
    for category, count in sorted(shadow.per_category.items()):
        status.disagreements.add(category=category, count=count, example_item_ids=list(shadow.examples.get(category, ())))


def review_task_message(task: ReviewTask, appeal: Appeal | None = None) -> apb.ReviewTask:
    """The proto form of a review task (with its appeal, for an appeal's task)."""
    message = apb.ReviewTask(task_id=task.task_id, reason=task.reason, deliveries=task.deliveries,
                             record=audit_message(task.record))
    if appeal is not None:
        message.appeal.CopyFrom(appeal_message(appeal))
    return message


def audit_message(record: AuditRecord) -> apb.AuditRecord:
    """The proto form of an audit record."""
    message = apb.AuditRecord(
        audit_id=record.audit_id, request_id=record.request_id, item_id=record.item_id, tenant=record.tenant,
        time=record.time, decision=DECISIONS[record.decision], policy_name=record.policy_name,
        policy_version=record.policy_version, degraded=record.degraded, canary_arm=record.canary_arm,
        metadata=dict(record.metadata), content=list(record.content), cached=record.cached,
        models=[pb.ModelVersion(name=name, version=version) for name, version in record.models],
        categories=[category_message(c) for c in record.categories])
    message.evidence.extend(evidence_message(evidence) for evidence in record.evidence)
    return message


def category_message(category: AuditCategory) -> apb.AuditCategory:
    """The proto form of one category of a decision."""
    return apb.AuditCategory(category=category.category, score=category.score, action=DECISIONS[category.action],
                             rule=category.rule, subcategory=category.subcategory)


def statement_message(statement: StatementOfReasons) -> apb.StatementOfReasons:
    """The proto form of a statement of reasons."""
    message = apb.StatementOfReasons(
        audit_id=statement.audit_id, item_id=statement.item_id, decided_at=statement.decided_at,
        decision=DECISIONS[statement.decision], restriction=statement.restriction, policy_name=statement.policy_name,
        policy_version=statement.policy_version, automated_detection=statement.automated_detection,
        automated_decision=statement.automated_decision, reviewed_by=statement.reviewed_by,
        reviewed_at=statement.reviewed_at, redress=statement.redress, degraded=statement.degraded,
        models=[pb.ModelVersion(name=name, version=version) for name, version in statement.models],
        grounds=[category_message(c) for c in statement.grounds])
    message.facts.extend(evidence_message(evidence) for evidence in statement.facts)
    message.appeals.extend(appeal_message(appeal) for appeal in statement.appeals)
    return message


def appeal_message(appeal: Appeal) -> apb.Appeal:
    """The proto form of an appeal."""
    return apb.Appeal(appeal_id=appeal.appeal_id, tenant=appeal.tenant, audit_id=appeal.audit_id, item_id=appeal.item_id,
                      appellant=appeal.appellant, statement=appeal.statement, submitted_at=appeal.submitted_at,
                      status=appeal.status, reviewer=appeal.reviewer, note=appeal.note, resolved_at=appeal.resolved_at)
