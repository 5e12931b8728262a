"""A KServe v2 / Triton `GRPCInferenceService` over the project's served models.

Thin adapter: decodes tensors (kserve_codec), queues each row in the model's DynamicBatcher, runs the
model in a worker thread (ONNX Runtime releases the GIL), and encodes the outputs. A Triton Inference
Server can replace a service built on this, since the router only uses the standard RPCs.

Telemetry: each row carries the span context of the ModelInfer call that queued it, and each batch
runs inside one span linked to all of them (`services.common.tracing.spans.batch_span`); batch sizes,
inference time, per-row queue wait, queue depth and calls by status code go to `ModelMetrics`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

import grpc
import numpy as np
from opentelemetry.trace import SpanContext
from tritonclient.grpc import model_config_pb2, service_pb2, service_pb2_grpc

from services.common.serving.batcher import DEFAULT_PRIORITY, PRIORITY_LEVELS, BatchingConfig, BatchReport, DynamicBatcher
from services.common.errors import FailedPreconditionError, InvalidInputError, QueueFullError
from services.common.serving.kserve_codec import check_rows, check_sizes, decode_inputs, encode_outputs
from services.common.serving.modality_config import ServingLimits
from services.common.serving.model_metrics import ModelMetrics
from services.common.serving.model_api import BatchStats, ServedModel
from services.common.serving.model_lifecycle import ModelLifecycle, models_parameter
from services.common.status import abort, bounded, call_status, code_for, quoted
from services.common.tracing.spans import batch_span, current_span_context

log = logging.getLogger(__name__)

_CONFIG_TYPES = {"BYTES": "TYPE_STRING", "FP32": "TYPE_FP32", "FP64": "TYPE_FP64", "INT32": "TYPE_INT32",
                 "INT64": "TYPE_INT64", "UINT8": "TYPE_UINT8", "BOOL": "TYPE_BOOL"}

Row = dict[str, np.ndarray]
#: A batch runs on the event loop's thread (BatchingConfig.inline_max_batch_size) only while its
#: BYTES rows total at most this: a big text in the model would stop the loop, and every other
#: caller, for as long as it takes.
INLINE_MAX_BYTES = 16 * 1024
#: Timed warm runs per model after warming (`measure_warm` keeps the fastest).
WARM_RUNS = 3


def _row_bytes(row: Row) -> int:
    return sum(sum(len(v) for v in array.reshape(-1) if isinstance(v, (bytes, bytearray)))
               for array in row.values() if array.dtype == np.object_)


@dataclass(frozen=True)
class _Item:
    """One row, the span context of the ModelInfer call that queued it (for the batch span's links) and
    its priority level (DEFAULT_PRIORITY when the call set none)."""

    row: Row
    origin: SpanContext
    priority: int


def lower_thread_priority(nice: int) -> None:
    """Make the calling thread `nice` steps nicer than it is (Linux schedules threads one by one; a
    thread may always lower its own priority). A ThreadPoolExecutor initializer."""
    thread = threading.get_native_id()
    os.setpriority(os.PRIO_PROCESS, thread, min(19, os.getpriority(os.PRIO_PROCESS, thread) + nice))


class ModelRunner:
    """One served model, its batcher, its worker thread, its statistics and (optionally) its metrics."""

    def __init__(self, model: ServedModel, batching: BatchingConfig, metrics: ModelMetrics | None = None) -> None:
        self.model = model
        self.stats = BatchStats()
        # named in every response (the router reports it); a model whose files change while it serves
        # (`files_change`: the match model's banks) is described afresh for each response
        self._models_json = None if getattr(model, "files_change", False) else models_parameter(model)
        #: (items, seconds) of the fastest timed warm run of the model's warm-up (`measure_warm`), reported in
        #: ModelConfig's `warmup` parameter so a router starts with an honest batch cost; None = unknown.
        self.warm_cost: tuple[int, float] | None = None
        self.metrics = metrics
        self._executor = ThreadPoolExecutor(max_workers=batching.max_concurrency + batching.urgent_concurrency,
                                            thread_name_prefix=f"model-{model.name}")
        #: bulk batches' threads, niced (BatchingConfig.background_nice); None = they share _executor
        self._background = ThreadPoolExecutor(
            max_workers=batching.max_concurrency, thread_name_prefix=f"model-{model.name}-background",
            initializer=lower_thread_priority, initargs=(batching.background_nice,)) if batching.background_nice else None
        config = replace(batching, max_batch_size=min(batching.max_batch_size, model.max_batch_size),
                         max_queue=max(batching.max_queue, model.max_batch_size))
        self.batcher: DynamicBatcher[_Item, Row] = DynamicBatcher(self._run_batch, config=config, on_batch=self._record)
        if metrics is not None:
            metrics.describe(model.name, model.version, model.platform, lambda: self.batcher.queue_depth)

    @property
    def models_json(self) -> str:
        """JSON [[name, version], ...] of the model and the files behind it, for a response."""
        return self._models_json if self._models_json is not None else models_parameter(self.model)

    async def submit(self, rows: list[Row], priority: int = 0) -> list[Row]:
        """Queue `rows` (from one ModelInfer call) at `priority` (lower = sooner, 0 = default) and wait
        for their output rows."""
        origin = current_span_context()
        level = priority or DEFAULT_PRIORITY
        return await self.batcher.submit([_Item(row, origin, level) for row in rows], level)

    async def _run_batch(self, items: list[_Item]) -> list[Row]:
        stacked = {name: np.stack([item.row[name] for item in items]) for name in items[0].row}
        with batch_span(f"batch {self.model.name}", [item.origin for item in items], {"auditmesh.model": self.model.name},
                        carry_unsampled=False):  # the model calls no other service
            config = self.batcher.config
            if self._background is not None and min(item.priority for item in items) >= config.background_priority:
                outputs = await asyncio.get_running_loop().run_in_executor(self._background, self.model.infer, stacked)
            elif (len(items) <= config.inline_max_batch_size
                    and sum(_row_bytes(item.row) for item in items) <= INLINE_MAX_BYTES):
                outputs = self.model.infer(stacked)  # cheaper than two thread hand-offs (BatchingConfig)
            else:
                outputs = await asyncio.get_running_loop().run_in_executor(self._executor, self.model.infer, stacked)
        return [{name: array[i] for name, array in outputs.items()} for i in range(len(items))]

    def _record(self, report: BatchReport) -> None:
        if self.metrics is not None:
            self.metrics.record_batch(self.model.name, report)
        stats = self.stats
        run_ns, queue_ns = int(report.run_s * 1e9), int(report.queue_wait_s * 1e9)
        stats.batch_sizes[report.size] = stats.batch_sizes.get(report.size, 0) + 1
        if report.error is None:
            stats.inference_count += report.size
            stats.execution_count += 1
            stats.success_ns += run_ns + queue_ns
            stats.compute_ns += run_ns
            stats.queue_ns += queue_ns
        else:
            stats.fail_count += report.size
            stats.fail_ns += run_ns

    async def close(self) -> None:
        await self.batcher.close()
        self._executor.shutdown(wait=True)
        if self._background is not None:
            self._background.shutdown(wait=True)


def model_problem(model: object) -> str | None:
    """A model's `serving_problem()` when it has one (a model whose data can go stale), else None."""
    problem = getattr(model, "serving_problem", None)
    return problem() if callable(problem) else None


class KServeServicer(service_pb2_grpc.GRPCInferenceServiceServicer):
    """Serves `runners` under the KServe v2 protocol. `ready` turns False while draining."""

    def __init__(self, server_name: str, server_version: str, runners: Mapping[str, ModelRunner], *,
                 metrics: ModelMetrics | None = None, limits: ServingLimits = ServingLimits()) -> None:
        self.server_name = server_name
        self.limits = limits
        self.server_version = server_version
        self.runners = dict(runners)
        self.metrics = metrics
        self.ready = False
        #: Hot reload behind RepositoryModelLoad/Unload (services.common.serving.model_lifecycle); None = index only.
        self.lifecycle: ModelLifecycle[ModelRunner] | None = None

    def _runner(self, name: str, version: str = "") -> ModelRunner | None:
        runner = self.runners.get(name)
        if runner is None or (version and version != runner.model.version):
            return None
        return runner

    async def ServerLive(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return service_pb2.ServerLiveResponse(live=True)

    def serving_problem(self) -> str | None:
        """Why a served model should not take traffic now (`serving_problem()` of a model that has one: the
        match model's stale banks), or None."""
        for runner in list(self.runners.values()):
            problem = model_problem(runner.model)
            if problem is not None:
                return f"{runner.model.name}: {problem}"
        return None

    async def ServerReady(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return service_pb2.ServerReadyResponse(ready=self.ready and self.serving_problem() is None)

    async def ModelReady(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        runner = self._runner(request.name, request.version)
        return service_pb2.ModelReadyResponse(ready=self.ready and runner is not None and model_problem(runner.model) is None)

    async def ServerMetadata(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return service_pb2.ServerMetadataResponse(name=self.server_name, version=self.server_version,
                                                  extensions=["model_repository", "statistics"])

    async def ModelMetadata(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        runner = await self._require(request.name, request.version, context)
        model = runner.model
        response = service_pb2.ModelMetadataResponse(name=model.name, versions=[model.version], platform=model.platform)
        for spec in model.inputs:
            response.inputs.add(name=spec.name, datatype=spec.datatype, shape=[-1, *spec.shape])
        for spec in model.outputs:
            response.outputs.add(name=spec.name, datatype=spec.datatype, shape=[-1, *spec.shape])
        return response

    async def ModelConfig(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        runner = await self._require(request.name, request.version, context)
        model = runner.model
        config = model_config_pb2.ModelConfig(name=model.name, platform=model.platform, max_batch_size=model.max_batch_size)
        for spec in model.inputs:
            config.input.add(name=spec.name, data_type=_CONFIG_TYPES[spec.datatype], dims=list(spec.shape))
        for spec in model.outputs:
            config.output.add(name=spec.name, data_type=_CONFIG_TYPES[spec.datatype], dims=list(spec.shape))
        config.dynamic_batching.max_queue_delay_microseconds = int(runner.batcher.config.max_delay_ms * 1000)
        # The `priority` levels the batcher honours (services/common/serving/batcher.py), as Triton reports them.
        config.dynamic_batching.priority_levels = PRIORITY_LEVELS
        config.dynamic_batching.default_priority_level = DEFAULT_PRIORITY
        for key, value in vars(self.limits).items():  # what one ModelInfer may carry (modality_config.ServingLimits)
            config.parameters[f"limits.{key}"].string_value = str(value)
        if runner.warm_cost is not None:
            items, seconds = runner.warm_cost
            config.parameters["warmup"].string_value = f"items={items} seconds={seconds:.6f}"
        for file in model.model_files():
            config.parameters[f"file:{file.name}"].string_value = f"version={file.version} sha256={file.sha256} license={file.license}"
        return service_pb2.ModelConfigResponse(config=config)

    async def ModelStatistics(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        names = [request.name] if request.name else sorted(self.runners)
        response = service_pb2.ModelStatisticsResponse()
        for name in names:
            runner = await self._require(name, request.version, context)
            s = runner.stats
            entry = response.model_stats.add(name=name, version=runner.model.version,
                                             inference_count=s.inference_count, execution_count=s.execution_count)
            entry.inference_stats.success.count, entry.inference_stats.success.ns = s.inference_count, s.success_ns
            entry.inference_stats.fail.count, entry.inference_stats.fail.ns = s.fail_count, s.fail_ns
            entry.inference_stats.queue.count, entry.inference_stats.queue.ns = s.inference_count, s.queue_ns
            entry.inference_stats.compute_infer.count, entry.inference_stats.compute_infer.ns = s.inference_count, s.compute_ns
            for size, count in sorted(s.batch_sizes.items()):
                entry.batch_stats.add(batch_size=size, compute_infer=service_pb2.StatisticDuration(count=count))
        return response

    async def RepositoryIndex(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        if self.lifecycle is not None:
            return service_pb2.RepositoryIndexResponse(models=[
                service_pb2.RepositoryIndexResponse.ModelIndex(name=m.name, version=m.version, reason=m.reason,
                                                               state=m.state if self.ready else "UNAVAILABLE")
                for m in self.lifecycle.index()])
        response = service_pb2.RepositoryIndexResponse()
        for name, runner in sorted(self.runners.items()):
            response.models.add(name=name, version=runner.model.version, state="READY" if self.ready else "UNAVAILABLE")
        return response

    async def RepositoryModelLoad(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        """Load the model again from the repository beside the serving one, then switch (model_lifecycle)."""
        version = request.parameters["version"].string_param if "version" in request.parameters else ""
        async with call_status(context, log):
            await self._lifecycle().load(request.model_name, version)
        return service_pb2.RepositoryModelLoadResponse()

    async def RepositoryModelUnload(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        async with call_status(context, log):
            await self._lifecycle().unload(request.model_name)
        return service_pb2.RepositoryModelUnloadResponse()

    def _lifecycle(self) -> ModelLifecycle[ModelRunner]:
        if self.lifecycle is None:
            raise FailedPreconditionError("this server's model repository is index-only (no hot reload)")
        return self.lifecycle

    async def ModelInfer(self, request: service_pb2.ModelInferRequest, context: grpc.aio.ServicerContext) -> Any:
        if self.lifecycle is not None and self.lifecycle.evicted(request.model_name):
            async with call_status(context, log):  # evicted for the memory budget: loaded again for this request
                await self.lifecycle.reload_evicted(request.model_name)
        if self._runner(request.model_name, request.model_version) is None:
            self._count("unknown", grpc.StatusCode.NOT_FOUND)  # not the caller's string: labels stay bounded
        runner = await self._require(request.model_name, request.model_version, context)
        if self.lifecycle is not None:
            self.lifecycle.touch(runner.model.name)
        model = runner.model
        try:
            check_rows(request, self.limits)
            arrays = decode_inputs(request, model.inputs)
            check_sizes(arrays, self.limits)
            size = next(iter(arrays.values())).shape[0]
            if size > model.max_batch_size:
                raise InvalidInputError(f"batch of {size} is over model {model.name!r}'s max_batch_size {model.max_batch_size}")
            rows = [{name: array[i] for name, array in arrays.items()} for i in range(size)]
            results = await runner.submit(rows, request_priority(request))
        except asyncio.CancelledError:  # the caller went away or its deadline passed
            self._count(model.name, grpc.StatusCode.CANCELLED)
            raise
        except Exception as error:
            self._count(model.name, code_for(error), error)
            await abort(context, error, log)
        self._count(model.name, grpc.StatusCode.OK)
        outputs = {spec.name: np.stack([row[spec.name] for row in results]) if results else np.empty((0, *spec.shape))
                   for spec in model.outputs}
        response = service_pb2.ModelInferResponse(model_name=model.name, model_version=model.version, id=request.id)
        response.parameters["models"].string_param = runner.models_json
        encode_outputs(response, outputs, model.outputs, [o.name for o in request.outputs])
        return response

    async def _require(self, name: str, version: str, context: grpc.aio.ServicerContext) -> ModelRunner:
        runner = self._runner(name, version)
        if runner is None:
            known = ", ".join(f"{n} (version {r.model.version})" for n, r in sorted(self.runners.items()))
            await context.abort(grpc.StatusCode.NOT_FOUND,
                                bounded(f"unknown model {quoted(name)} version {quoted(version)}; this server has: {known}"))
        assert runner is not None  # abort() raises; this narrows the type for mypy
        return runner

    def _count(self, model: str, code: grpc.StatusCode, error: BaseException | None = None) -> None:
        if self.metrics is None:
            return
        self.metrics.requests.labels(model, code.name).inc()
        if isinstance(error, QueueFullError):
            self.metrics.shed.labels(model, "queue_full").inc()



def build_runners(models: Sequence[ServedModel], batching: BatchingConfig,
                  metrics: ModelMetrics | None = None) -> dict[str, ModelRunner]:
    """One ModelRunner per model, keyed by model name."""
    return {model.name: ModelRunner(model, batching, metrics) for model in models}


def warm_up(models: Sequence[ServedModel]) -> float:
    """Warm every model; returns the seconds it took."""
    started = time.monotonic()
    for model in models:
        model.warmup()
    return time.monotonic() - started


def measure_warm(model: ServedModel, runs: int = WARM_RUNS) -> tuple[int, float] | None:
    """(items, seconds) of the fastest of `runs` more runs of the model's warm-up, after `warm_up`: what
    that many items cost on a warm model here. The fastest, because a busy host only ever adds time
    (services start side by side: one run on a loaded host took 2.5 s for a 0.3 s image). None (and no
    run) for a model that does not say how many items its warm-up runs (an optional `warmup_items`
    attribute)."""
    items = getattr(model, "warmup_items", None)
    if not isinstance(items, int) or items < 1:
        return None
    if runs < 1:
        raise ValueError(f"runs must be >= 1, got {runs}")
    fastest = float("inf")
    for _ in range(runs):
        started = time.monotonic()
        model.warmup()
        fastest = min(fastest, time.monotonic() - started)
    return items, fastest


def request_priority(request: service_pb2.ModelInferRequest) -> int:
    """The request's `priority` parameter (Triton's: uint64, lower = sooner; 0 or absent = default)."""
    parameter = request.parameters.get("priority") if request.parameters else None
    if parameter is None:
        return 0
    kind = parameter.WhichOneof("parameter_choice")
    value = getattr(parameter, kind) if kind in ("uint64_param", "int64_param") else 0
    return max(0, int(value))
