"""auditmesh.v1.ModerationService, the mesh's front door: a thin adapter. Per call it authenticates
(one snapshot of tenants and policies for the whole call), computes the deadline
(`services.router.deadlines`), runs the pipeline, converts the result (`services.router.messages`) and
maps errors to a status in one place (`services.common.status`).

It also records telemetry: one span per item with tenant and QoS class (`services.common.tracing.spans`),
Prometheus metrics (`services.router.metrics`), and log lines tagged with the request id and trace id
(`services.common.logs.request_scope`), never with content. The wiring and CLI are in `main.py`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, replace
from typing import AsyncIterator, Sequence

import grpc
from auditmesh.v1 import moderation_pb2 as pb
from auditmesh.v1 import moderation_pb2_grpc as pb_grpc

from services import __version__
from services.common.auth_guard import AuthGuard
from services.common.auth_throttle import AuthThrottle
from services.common.errors import LimitExceededError
from services.common.logs import request_scope
from services.common.request_decoding import UndecodableRequest
from services.common.metrics import new_registry
from services.common.status import call_status, code_for, describe, retry_after_s
from services.common.tracing.spans import item_span
from services.router.admission import Admission, OverQuotaError, Ticket
from services.router.cached_pipeline import CachedPipeline
from services.router.config import RouterConfig
from services.router.control.runtime import Snapshot
from services.router.deadlines import budget_s
from services.router.frames import FrameDecoder, with_frames
from services.router.lanes import LaneGate
from services.router.messages import error_response, raw_parts, response_for
from services.router.metrics import UNKNOWN, RouterMetrics
from services.router.pipeline import Outcome, Pipeline
from services.router.policy_lifecycle import PolicyLifecycle
from services.router.scheduler import Requester
from services.router.shared_quota import SharedQuota
from services.router.stream_answers import answer_stream
from services.router.tenants import Tenant
from services.router.validation import validate_item

log = logging.getLogger("services.router.server")
SERVICE_NAME = "auditmesh.v1.ModerationService"
#: Request streams whose undecodable messages reach the servicer (answered with an error, the stream
#: goes on) instead of ending the call (services.common.request_decoding).
TOLERANT_STREAMS = (f"/{SERVICE_NAME}/ModerateStream",)
STREAM_MAX_IN_FLIGHT = 256


def api_key_from(metadata: Sequence[tuple[str, str | bytes]] | None) -> str | None:
    """The API key from `x-api-key` or `authorization: Bearer <key>` call metadata."""
    for key, value in metadata or ():
        text = value.decode() if isinstance(value, bytes) else value
        if key == "x-api-key":
            return text.strip()
        if key == "authorization" and text.lower().startswith("bearer "):
            return text[7:].strip()
    return None


@dataclass(frozen=True)
class Caller:
    """An authenticated call: the tenant and the one snapshot every item of the call is judged under."""

    tenant: Tenant
    snapshot: Snapshot


class ModerationServicer(pb_grpc.ModerationServiceServicer):
    def __init__(self, config: RouterConfig, lifecycle: PolicyLifecycle, pipeline: Pipeline,
                 metrics: RouterMetrics | None = None, *, guard: AuthGuard | None = None,
                 shared_quota: SharedQuota | None = None) -> None:
        self.config = config
        self.lifecycle = lifecycle
        self.pipeline = pipeline
        self.verdicts = CachedPipeline.from_config(pipeline, config.verdict_cache)
        self.admission = Admission()
        #: Animations decoded into frames, on threads of their own (services/router/frames.py).
        self.frames = FrameDecoder()
        #: Tenants' rate quotas across all router replicas (services/router/shared_quota.py); None = per process.
        self.shared_quota = shared_quota
        self.lane_gate = LaneGate(config.lane, config.lanes)
        self.metrics = metrics if metrics is not None else RouterMetrics(new_registry("router", __version__))
        #: Failed-auth throttle (services/common/auth_guard.py); main.py gives it one counted in metrics.
        self.guard = guard or AuthGuard(AuthThrottle(config.auth_throttle), surface="public")

    def _authenticate(self, context: grpc.aio.ServicerContext) -> Caller:
        """The calling tenant (UnauthenticatedError; AuthThrottledError after too many failures from
        the peer), if this process's lane serves its class
        (PermissionDeniedError naming the right lane otherwise), with the snapshot it was found in."""
        snapshot = self.lifecycle.runtime.snapshot
        key = api_key_from(context.invocation_metadata())
        if not key:  # no guess was made: UNAUTHENTICATED, and it does not count towards the throttle
            tenant = snapshot.tenants.authenticate(key)
        else:
            tenant = self.guard.check(context.peer(), lambda: snapshot.tenants.authenticate(key))
        self.lane_gate.check(tenant.id, tenant.qos_class)
        return Caller(tenant, snapshot)

    def _deadline(self, caller: Caller, context: grpc.aio.ServicerContext, requested_ms: int = 0) -> float:
        remaining = context.time_remaining()
        return time.monotonic() + budget_s(caller.tenant.deadlines, self.config.deadlines,
                                           requested_ms=requested_ms, remaining_s=remaining)

    async def _moderate(self, caller: Caller, request_id: str, item: pb.Item, policy_name: str, deadline: float,
                        where: str, admitted: bool = False, new_trace: bool = False) -> pb.ModerateResponse:
        """One item, inside its span and the in-flight gauge; records its metrics and a log line."""
        started = time.monotonic()
        tenant = caller.tenant
        qos = tenant.qos_class
        attributes = {"auditmesh.tenant": tenant.id, "auditmesh.qos_class": qos}
        in_flight = self.metrics.in_flight_for(qos)
        in_flight.inc()
        try:
            with item_span("auditmesh.moderate_item", attributes, new_trace=new_trace) as span:
                try:
                    response, outcome = await self._run_item(caller, request_id, item, policy_name, deadline, where,
                                                             admitted)
                except BaseException as error:
                    self.metrics.record_refused(tenant.id, qos, code_for(error), error, time.monotonic() - started)
                    raise
                verdict = outcome.verdict
                self.metrics.record_item(tenant.id, qos, "OK", verdict.decision, outcome.timings_ms,
                                         time.monotonic() - started)
                if verdict.degradations:
                    self.metrics.record_degradations(verdict.degradations)
                self.metrics.record_subcategories(verdict.categories)
                if span is not None:
                    span.set_attributes({"auditmesh.decision": verdict.decision,
                                         "auditmesh.degraded": bool(verdict.degradations)})
        finally:
            in_flight.dec()
        if log.isEnabledFor(logging.DEBUG):  # the fields cost more than the check, per item
            log.debug("moderated", extra={"tenant": tenant.id, "qos_class": qos, "decision": verdict.decision,
                                          "degraded": bool(verdict.degradations),
                                          "total_ms": round((time.monotonic() - started) * 1000, 3)})
        return response

    async def _run_item(self, caller: Caller, request_id: str, item: pb.Item, policy_name: str, deadline: float,
                        where: str, admitted: bool) -> tuple[pb.ModerateResponse, Outcome]:
        started = time.monotonic()
        # The call's one snapshot: one policy version (and canary arm), and the tenant settings (quota,
        # degrade, priority) read from that same snapshot, from start to end.
        selection = caller.snapshot.select(caller.tenant, policy_name, item.id or request_id)
        tenant, policy = selection.tenant, selection.policy
        valid = validate_item(item.id, raw_parts(item), self.config.limits, where, item.metadata)
        ticket = None if admitted else await self._admit(tenant, 1)
        admission_ms = (time.monotonic() - started) * 1000
        requester = Requester(tenant.id, caller.snapshot.tenants.priority(tenant), tenant.weight)
        try:
            frames_started = time.monotonic()
            # an animation becomes a sample of its still frames (decoded off the event loop, after admission)
            valid, frames = await self.frames.expand(valid, self.config.limits, tenant=tenant.id, deadline=deadline,
                                                     where=where)
            frames_ms = (time.monotonic() - frames_started) * 1000
            with self.lifecycle.observing(selection, item.id):
                outcome = await self.verdicts.run(selection, valid, deadline, requester, tenant.degrade)
        finally:
            if ticket is not None:
                self.admission.release(ticket)
        outcome.timings_ms["admission"] = admission_ms
        if frames:  # the evidence names each frame's part and frame number
            outcome = replace(outcome, verdict=with_frames(outcome.verdict, frames),
                              timings_ms={**outcome.timings_ms, "frames": frames_ms})
        response = response_for(request_id, item.id, policy.name, policy.version, outcome, (time.monotonic() - started) * 1000)
        response.audit_id = self.lifecycle.record(selection, request_id, item.id, item.metadata,
                                                  [p.text for p in valid.texts], outcome)
        return response, outcome

    def _refused(self, caller: Caller | None, error: BaseException) -> None:
        """Count a call refused before any item ran (no key, over the batch limit or the quota)."""
        tenant = caller.tenant if caller else None
        self.metrics.record_refused(tenant.id if tenant else UNKNOWN, tenant.qos_class if tenant else UNKNOWN,
                                    code_for(error), error)

    async def _admit(self, tenant: Tenant, items: int) -> Ticket:
        """Take `items` of the tenant's quota: fleet-wide first (the shared quota, when configured), then
        this replica's token bucket and in-flight cap. Nothing stays charged when either refuses."""
        taken = None
        if self.shared_quota is not None:
            taken = await self.shared_quota.take(tenant.id, tenant.quota, items, qos_class=tenant.qos_class)
        try:
            return self.admission.admit(tenant.id, tenant.quota, items, time.monotonic())
        except OverQuotaError:
            if self.shared_quota is not None and taken is not None:
                self.shared_quota.give_back(tenant.id, items, taken)
            raise

    async def _admit_call(self, context: grpc.aio.ServicerContext, items: int | None = None) -> tuple[Caller, Ticket | None]:
        """Authenticate the call and, for a batch of `items`, check the batch limit and take its quota."""
        caller: Caller | None = None
        try:
            caller = self._authenticate(context)
            if items is None:
                return caller, None
            limit = self.config.limits.max_batch_items
            if items > limit:
                raise LimitExceededError(f"batch has {items} items; the limit is {limit}")
            return caller, await self._admit(caller.tenant, items)
        except Exception as error:
            self._refused(caller, error)
            raise

    async def Moderate(self, request: pb.ModerateRequest, context: grpc.aio.ServicerContext) -> pb.ModerateResponse:
        with request_scope(request.request_id):
            async with call_status(context, log):
                caller, _ = await self._admit_call(context)
                deadline = self._deadline(caller, context, request.deadline_ms)
                return await self._moderate(caller, request.request_id, request.item, request.policy, deadline, "item")

    async def ModerateBatch(self, request: pb.ModerateBatchRequest, context: grpc.aio.ServicerContext) -> pb.ModerateBatchResponse:
        with request_scope():
            async with call_status(context, log):
                caller, ticket = await self._admit_call(context, len(request.items))
                try:
                    deadline = self._deadline(caller, context)
                    results = await asyncio.gather(*(self._one_or_error(caller, "", item, request.policy, deadline,
                                                                        f"items[{i}]", admitted=True)
                                                     for i, item in enumerate(request.items)))
                finally:
                    if ticket is not None:
                        self.admission.release(ticket)
                return pb.ModerateBatchResponse(results=results)

    async def _one_or_error(self, caller: Caller, request_id: str, item: pb.Item, policy: str, deadline: float,
                            where: str, admitted: bool = False, new_trace: bool = False) -> pb.ModerateResponse:
        """One item of a batch or stream; an error becomes that item's error response, not the call's."""
        try:
            return await self._moderate(caller, request_id, item, policy, deadline, where, admitted, new_trace)
        except asyncio.CancelledError:
            raise
        except Exception as error:
            code, message = describe(error, log)
            return error_response(request_id, item.id, code.value[0], message, retry_after_s(error))

    async def ModerateStream(self, request_iterator: AsyncIterator[pb.ModerateRequest | UndecodableRequest],
                             context: grpc.aio.ServicerContext) -> AsyncIterator[pb.ModerateResponse]:
        async with call_status(context, log):
            caller, _ = await self._admit_call(context)
        # Read once: the call's gRPC deadline is fixed, so each message's time left follows from it.
        remaining = context.time_remaining()
        call_deadline = None if remaining is None else time.monotonic() + remaining
        tenant_deadlines, router_deadlines = caller.tenant.deadlines, self.config.deadlines

        async def answer(request: pb.ModerateRequest | UndecodableRequest) -> pb.ModerateResponse:
            if isinstance(request, UndecodableRequest):  # the proto: a bad message gets its error, the stream goes on
                return error_response("", "", grpc.StatusCode.INVALID_ARGUMENT.value[0], request.message)
            with request_scope(request.request_id):  # each message: its own trace, linked to the stream's
                now = time.monotonic()
                try:
                    deadline = now + budget_s(tenant_deadlines, router_deadlines, requested_ms=request.deadline_ms,
                                              remaining_s=None if call_deadline is None else call_deadline - now)
                except Exception as error:
                    code, message = describe(error, log)
                    return error_response(request.request_id, request.item.id, code.value[0], message)
                return await self._one_or_error(caller, request.request_id, request.item, request.policy, deadline,
                                                "item", new_trace=True)

        async with call_status(context, log):  # a stream that can no longer be read ends with UNAVAILABLE
            async for response in answer_stream(request_iterator, answer, max_in_flight=STREAM_MAX_IN_FLIGHT):
                yield response
