"""The router: auditmesh.v1.ModerationService, the mesh's front door. A thin adapter: it authenticates,
validates, computes the deadline, runs the pipeline and maps errors to a status in one place.

It also records telemetry: one span per item with tenant and QoS class (`services.common.spans`),
Prometheus metrics (`services.router.metrics`) on `server.metrics_listen`, and log lines tagged with
the request id and trace id (`services.common.logs.request_scope`), never with content.

Run: `python -m services.router.server --config config/router.yaml` (see `--help`).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import time
from pathlib import Path
from typing import AsyncIterator, Sequence

import grpc
from auditmesh.v1 import moderation_pb2 as pb
from auditmesh.v1 import moderation_pb2_grpc as pb_grpc
from grpc_status import rpc_status

from services import __version__
from services.common.batcher import QueueFullError
from services.common.config import ConfigError
from services.common.errors import LimitExceededError, status_for
from services.common.grpc_server import GrpcService
from services.common.logs import configure_logging, request_scope
from services.common.metrics import new_registry
from services.common.spans import item_span
from services.common.telemetry import setup_tracing, shutdown_tracing
from services.router.admission import Admission, OverQuotaError
from services.router.config import RouterConfig, load_router_config
from services.router.convert import error_response, raw_parts, response_for, status_with_retry
from services.router.dispatch import ModalityDispatcher
from services.router.lanes import LaneGate, apply_nice, check_classes_covered, log_service_name
from services.router.lifecycle import ADMIN_SERVICE_NAME, PolicyLifecycle
from services.router.metrics import UNKNOWN, PolicyVersionsCollector, RouterMetrics, SchedulerCollector
from services.router.pipeline import Outcome, Pipeline
from services.router.policy_runtime import Snapshot
from services.router.scheduler import Requester
from services.router.tenants import Tenant
from services.router.validation import validate_item

log = logging.getLogger(__name__)
SERVICE_NAME = "auditmesh.v1.ModerationService"
STREAM_MAX_IN_FLIGHT = 256
#: Retry hint when a modality queue is full.
QUEUE_FULL_RETRY_S = 0.1


#: What the router reads per request: tenants and active policy versions, replaced as a whole by the
#: policy lifecycle (services/router/policy_runtime.py), never mutated.
RouterState = Snapshot


def api_key_from(metadata: Sequence[tuple[str, str | bytes]] | None) -> str | None:
    """The API key from `x-api-key` or `authorization: Bearer <key>` call metadata."""
    for key, value in metadata or ():
        text = value.decode() if isinstance(value, bytes) else value
        if key == "x-api-key":
            return text.strip()
        if key == "authorization" and text.lower().startswith("bearer "):
            return text[7:].strip()
    return None


class ModerationServicer(pb_grpc.ModerationServiceServicer):
    def __init__(self, config: RouterConfig, lifecycle: PolicyLifecycle, pipeline: Pipeline,
                 metrics: RouterMetrics | None = None) -> None:
        self.config = config
        self.lifecycle = lifecycle
        self.pipeline = pipeline
        self.admission = Admission()
        self.lane_gate = LaneGate(config.lane, config.lanes)
        self.metrics = metrics if metrics is not None else RouterMetrics(new_registry("router", __version__))

    @property
    def state(self) -> RouterState:
        """The live snapshot (swapped atomically by the policy lifecycle)."""
        return self.lifecycle.runtime.snapshot

    def _deadline(self, tenant: Tenant, context: grpc.aio.ServicerContext, requested_ms: int = 0) -> float:
        """Now + the budget: the request's own (stream), else the tenant's or router's default; capped
        by the tenant's or router's maximum and by the call's gRPC deadline."""
        default_ms = tenant.deadlines.default_ms or self.config.deadlines.default_ms
        max_ms = tenant.deadlines.max_ms or self.config.deadlines.max_ms
        remaining = context.time_remaining()
        if requested_ms:
            budget = min(requested_ms, max_ms) / 1000.0
            if remaining is not None:
                budget = min(budget, remaining)
        elif remaining is not None:
            budget = min(remaining, max_ms / 1000.0)
        else:
            budget = min(default_ms, max_ms) / 1000.0
        return time.monotonic() + budget

    def _authenticate(self, context: grpc.aio.ServicerContext) -> Tenant:
        """The calling tenant (UnauthenticatedError), if this process's lane serves its class
        (PermissionDeniedError naming the right lane otherwise)."""
        tenant = self.state.tenants.authenticate(api_key_from(context.invocation_metadata()))
        self.lane_gate.check(tenant.id, tenant.qos_class)
        return tenant

    def _requester(self, tenant: Tenant) -> Requester:
        return Requester(tenant.id, self.state.tenants.priority(tenant), tenant.weight)

    async def _moderate(self, tenant: Tenant, request_id: str, item: pb.Item, policy_name: str, deadline: float,
                        where: str, admitted: bool = False, new_trace: bool = False) -> pb.ModerateResponse:
        """One item, inside its span and the in-flight gauge; records its metrics and a log line."""
        started = time.monotonic()
        qos = tenant.qos_class
        attributes = {"auditmesh.tenant": tenant.id, "auditmesh.qos_class": qos}
        with item_span("auditmesh.moderate_item", attributes, new_trace=new_trace) as span, \
                self.metrics.in_flight.labels(qos).track_inprogress():
            try:
                response, outcome = await self._run_item(tenant, request_id, item, policy_name, deadline, where, admitted)
            except BaseException as error:
                self.metrics.record_refused(tenant.id, qos, _code(error), error, time.monotonic() - started)
                raise
            verdict = outcome.verdict
            self.metrics.record_item(tenant.id, qos, "OK", verdict.decision, outcome.timings_ms, time.monotonic() - started)
            self.metrics.record_degradations(verdict.degradations)
            if span is not None:
                span.set_attributes({"auditmesh.decision": verdict.decision, "auditmesh.degraded": bool(verdict.degradations)})
        log.debug("moderated", extra={"tenant": tenant.id, "qos_class": qos, "decision": verdict.decision,
                                      "degraded": bool(verdict.degradations),
                                      "total_ms": round((time.monotonic() - started) * 1000, 3)})
        return response

    async def _run_item(self, tenant: Tenant, request_id: str, item: pb.Item, policy_name: str, deadline: float,
                        where: str, admitted: bool) -> tuple[pb.ModerateResponse, Outcome]:
        started = time.monotonic()
        # One snapshot, so one policy version (and canary arm) from start to end, named in the response.
        selection = self.lifecycle.select(tenant, policy_name, item.id or request_id)
        policy = selection.policy
        valid = validate_item(item.id, raw_parts(item), self.config.limits, where)
        ticket = None if admitted else self.admission.admit(tenant.id, tenant.quota, 1, started)
        admission_ms = (time.monotonic() - started) * 1000
        try:
            with self.lifecycle.observing(selection, item.id):
                outcome = await self.pipeline.run(valid, policy, deadline, self._requester(tenant), tenant.degrade,
                                                  shadow=selection.shadow)
        finally:
            if ticket is not None:
                self.admission.release(ticket)
        outcome.timings_ms["admission"] = admission_ms
        response = response_for(request_id, item.id, policy.name, policy.version, outcome, (time.monotonic() - started) * 1000)
        self.lifecycle.record(selection, request_id, item.id, item.metadata, [p.text for p in valid.texts], outcome)
        return response, outcome

    def _refused(self, tenant: Tenant | None, error: BaseException) -> None:
        """Count a call refused before any item ran (no key, over the batch limit or the quota)."""
        self.metrics.record_refused(tenant.id if tenant else UNKNOWN, tenant.qos_class if tenant else UNKNOWN,
                                    _code(error), error)

    async def Moderate(self, request: pb.ModerateRequest, context: grpc.aio.ServicerContext) -> pb.ModerateResponse:
        with request_scope(request.request_id):
            tenant: Tenant | None = None
            try:
                tenant = self._authenticate(context)
                deadline = self._deadline(tenant, context, request.deadline_ms)
            except Exception as error:
                self._refused(tenant, error)
                await _abort(context, error)
                raise  # unreachable: abort raises
            try:
                return await self._moderate(tenant, request.request_id, request.item, request.policy, deadline, "item")
            except asyncio.CancelledError:
                raise
            except Exception as error:
                await _abort(context, error)
                raise  # unreachable: abort raises

    async def ModerateBatch(self, request: pb.ModerateBatchRequest, context: grpc.aio.ServicerContext) -> pb.ModerateBatchResponse:
        with request_scope():
            tenant: Tenant | None = None
            try:
                tenant = self._authenticate(context)
                limit = self.config.limits.max_batch_items
                if len(request.items) > limit:
                    raise LimitExceededError(f"batch has {len(request.items)} items; the limit is {limit}")
                ticket = self.admission.admit(tenant.id, tenant.quota, len(request.items), time.monotonic())
            except Exception as error:
                self._refused(tenant, error)
                await _abort(context, error)
                raise
            try:
                deadline = self._deadline(tenant, context)
                results = await asyncio.gather(*(self._one_or_error(tenant, "", item, request.policy, deadline,
                                                                    f"items[{i}]", admitted=True)
                                                 for i, item in enumerate(request.items)))
            finally:
                self.admission.release(ticket)
            return pb.ModerateBatchResponse(results=results)

    async def _one_or_error(self, tenant: Tenant, request_id: str, item: pb.Item, policy: str, deadline: float,
                            where: str, admitted: bool = False, new_trace: bool = False) -> pb.ModerateResponse:
        try:
            return await self._moderate(tenant, request_id, item, policy, deadline, where, admitted, new_trace)
        except asyncio.CancelledError:
            raise
        except Exception as error:
            code, message = _status(error)
            return error_response(request_id, item.id, code.value[0], message, _retry_after(error))

    async def ModerateStream(self, request_iterator: AsyncIterator[pb.ModerateRequest],
                             context: grpc.aio.ServicerContext) -> AsyncIterator[pb.ModerateResponse]:
        try:
            tenant = self._authenticate(context)
        except Exception as error:
            self._refused(None, error)
            await _abort(context, error)
            raise
        responses: asyncio.Queue[pb.ModerateResponse | None] = asyncio.Queue()
        slots = asyncio.Semaphore(STREAM_MAX_IN_FLIGHT)  # backpressure: stop reading when this many are pending

        async def handle(request: pb.ModerateRequest) -> None:
            try:
                with request_scope(request.request_id):  # each message: its own trace, linked to the stream's
                    deadline = self._deadline(tenant, context, request.deadline_ms)
                    await responses.put(await self._one_or_error(tenant, request.request_id, request.item,
                                                                 request.policy, deadline, "item", new_trace=True))
            finally:
                slots.release()

        async def read_all() -> None:
            async with asyncio.TaskGroup() as group:
                async for request in request_iterator:
                    await slots.acquire()
                    group.create_task(handle(request))
            await responses.put(None)

        reader = asyncio.create_task(read_all())
        try:
            while (response := await responses.get()) is not None:
                yield response
            await reader
        finally:
            reader.cancel()


def _retry_after(error: BaseException) -> float | None:
    """Seconds a client should wait before retrying, for errors that carry a hint."""
    if isinstance(error, OverQuotaError):
        return error.retry_after_s
    if isinstance(error, QueueFullError):
        return QUEUE_FULL_RETRY_S
    return None


async def _abort(context: grpc.aio.ServicerContext, error: BaseException) -> None:
    """Fail the call with the error's status; RESOURCE_EXHAUSTED carries google.rpc.RetryInfo."""
    code, message = _status(error)
    retry_after = _retry_after(error)
    if retry_after is None:
        await context.abort(code, message)
    status = status_with_retry(code.value[0], message, retry_after or 0.0)
    await context.abort_with_status(rpc_status.to_status(status))


def _code(error: BaseException) -> grpc.StatusCode:
    """The status an error maps to (CANCELLED for a cancelled call, INTERNAL for a bug)."""
    if isinstance(error, asyncio.CancelledError):
        return grpc.StatusCode.CANCELLED
    return status_for(error) or grpc.StatusCode.INTERNAL


def _status(error: BaseException) -> tuple[grpc.StatusCode, str]:
    code = status_for(error)
    if code is None:
        log.exception("unexpected error while moderating", exc_info=error)
        return grpc.StatusCode.INTERNAL, "internal error (see router log)"
    log.info("request rejected: %s: %s", code.name, error)
    return code, str(error)


class Router:
    """The router's parts wired together: dispatchers, pipeline, servicer, gRPC server."""

    OUTPUTS = {"text": ("TEXT", ("TOXICITY", "SPAM", "MATCHES")),
               "vision": ("IMAGE", ("SEXUAL", "VIOLENCE", "DETAILS", "ERROR")),
               "ocr": ("IMAGE", ("LINES", "ERROR"))}

    def __init__(self, config: RouterConfig, lifecycle: PolicyLifecycle) -> None:
        self.config = config
        self.lifecycle = lifecycle
        state = lifecycle.runtime.snapshot
        self.registry = new_registry("router", __version__)
        self.metrics = RouterMetrics(self.registry)
        self.dispatchers = {m: ModalityDispatcher(m, config.upstreams[m], input_name=self.OUTPUTS[m][0],
                                                  output_names=self.OUTPUTS[m][1],
                                                  max_message_bytes=config.server.max_message_bytes,
                                                  qos_classes=state.tenants.qos_classes,
                                                  on_batch=self.metrics.record_batch)
                            for m in self.OUTPUTS}
        self.pipeline = Pipeline(self.dispatchers["text"], self.dispatchers["vision"], self.dispatchers["ocr"])
        self.registry.register(PolicyVersionsCollector(lambda: lifecycle.runtime.snapshot.policy_versions()))
        self.registry.register(SchedulerCollector({m: d.scheduler for m, d in self.dispatchers.items()}))
        self.registry.register(lifecycle.collector())
        self.servicer = ModerationServicer(config, lifecycle, self.pipeline, self.metrics)
        self._describe_task: asyncio.Task[None] | None = None
        self.service = GrpcService("router", config.server, service_names=[SERVICE_NAME, ADMIN_SERVICE_NAME],
                                   register=self._register,
                                   on_close=[self._close], metrics_registry=self.registry)

    def _register(self, server: grpc.aio.Server) -> None:
        pb_grpc.add_ModerationServiceServicer_to_server(self.servicer, server)
        self.lifecycle.register(server)
        for dispatcher in self.dispatchers.values():
            dispatcher.start()
        self._describe_task = asyncio.get_running_loop().create_task(self._describe_upstreams())

    async def _describe_upstreams(self) -> None:
        """Learn the model versions behind each upstream (retrying while a service is still starting)."""
        while len(self.pipeline.models) < len(self.dispatchers):
            for modality, dispatcher in self.dispatchers.items():
                if modality not in self.pipeline.models:
                    versions = await dispatcher.describe_models()
                    if versions:
                        self.pipeline.models[modality] = versions
                        self.metrics.describe_upstream(modality, versions)
            await asyncio.sleep(1.0)

    async def _close(self) -> None:
        if self._describe_task is not None:
            self._describe_task.cancel()
        for dispatcher in self.dispatchers.values():
            await dispatcher.close()
        await self.lifecycle.close()


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m services.router.server",
        description="auditmesh router: auditmesh.v1.ModerationService (Moderate, ModerateBatch, ModerateStream). "
                    "Authenticates tenants by API key, fans items out to the text, vision and OCR services "
                    "(KServe v2 gRPC), and fuses the scores through the tenant's policy. SIGTERM drains and exits.")
    parser.add_argument("--config", type=Path, default=Path("config/router.yaml"),
                        help="router config YAML (default: config/router.yaml); env AUDITMESH_LISTEN, "
                             "AUDITMESH_METRICS_LISTEN ('off' for none), AUDITMESH_{TEXT,VISION,OCR}_URL, "
                             "AUDITMESH_TENANTS_FILE, AUDITMESH_POLICIES_DIR override it. Tracing: OTEL_TRACES_EXPORTER "
                             "(otlp, console; default none), OTEL_TRACES_SAMPLER[_ARG], OTEL_EXPORTER_OTLP_ENDPOINT")
    parser.add_argument("--lane", default=None,
                        help="with `lanes:` in the config, the lane this process serves (its port and QoS classes; "
                             "default: env AUDITMESH_LANE, else the first lane). Run one process per lane.")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    parser.add_argument("--log-format", default="text", choices=["text", "json"])
    return parser.parse_args(argv)


async def _serve(config: RouterConfig, lifecycle: PolicyLifecycle) -> None:
    router = Router(config, lifecycle)
    await router.service.start()
    await router.service.serve_until_signal()


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    configure_logging("router", args.log_level, args.log_format)
    try:
        config = load_router_config(args.config, args.lane)
        if config.lane is not None:  # lanes are processes of their own: their log lines say which
            configure_logging(log_service_name(config.lane), args.log_level, args.log_format)
        lifecycle = PolicyLifecycle.open(config)  # fails before binding the port on a bad tenants or policy file
        try:
            check_classes_covered(config.lanes, [c.name for c in lifecycle.runtime.snapshot.tenants.qos_classes])
        except ValueError as error:
            raise ConfigError(str(args.config), "lanes", str(error)) from None
        if config.lane is not None:
            others = [lane.name for lane in config.lanes if lane is not config.lane]
            log.info("lane %s: serving QoS classes %s on %s; other lanes (their own processes): %s", config.lane.name,
                     ", ".join(config.lane.classes), config.server.listen, ", ".join(others) or "none")
        apply_nice(config.lane)
        setup_tracing("router")  # before any channel exists: the upstream channels must be instrumented
    except (ConfigError, ValueError) as error:  # ValueError: an OTEL_* variable with a bad value
        print(f"router: {error}", file=sys.stderr)
        return 2
    try:
        asyncio.run(_serve(config, lifecycle))
    finally:
        shutdown_tracing()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
