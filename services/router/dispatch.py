"""The one place where the router queues items for a modality service and sends them in batches.

Each `ModalityDispatcher` owns a `FairScheduler`: items from all concurrent requests for, say, the OCR
service are ordered by QoS class and tenant fairness, cut to meet their deadlines, and merged into one
KServe v2 `ModelInfer` call (tensor [N, 1] of BYTES) sent with `tritonclient.grpc.aio`, so a Triton
Inference Server can stand in for any modality service. There is one channel per QoS class, opened
with the class's DSCP value (`grpc.dscp`) so the kernel (ebpf/) can prioritise the packets; a batch
goes out on the channel of the highest class in it, and carries that class as the KServe request's
`priority` parameter (class position + 1: realtime 1, standard 2, bulk 3; lower = sooner, as in
Triton's dynamic batcher), so a modality service shared by several router lanes serves the most
urgent batches first. The downstream call carries a gRPC deadline
equal to the latest deadline in the batch; each caller still waits only until its own deadline, and a
caller that gives up leaves the queue at once.

Sizes: every batch is cut to the upstream's `limits.max_request_bytes` (its own config file, read at
start: services/router/config.py), so big images are sent in several requests instead of one the
service would refuse. If the service still refuses a batch because of what is in it
(INVALID_ARGUMENT, or RESOURCE_EXHAUSTED over a size limit), each item is retried alone, so only the
item at fault fails, with its own INVALID_ARGUMENT / RESOURCE_EXHAUSTED: a refusal caused by the
request is never a stage failure that the policy would answer fail-open. Stage failures name the
service and the status code only: never its address, nor the service's message (which may be about
another caller's item).

Model versions: every row also carries `MODELS_OUTPUT`, the (name, version) pairs of the models that
produced it, read from the response (the served model's `model_version` and, from our services, the
`models` response parameter listing the files behind it), so a response names the versions actually
used even while a modality service swaps models.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping, Sequence

import numpy as np
from opentelemetry.trace import SpanContext
from tritonclient.grpc import InferInput, InferRequestedOutput
from tritonclient.utils import InferenceServerException

from services.common.errors import DeadlineExceededError, InvalidRequestError, LimitExceededError
from services.common.request_decoding import RateLimitedNote
from services.common.serving.kserve_codec import BYTES_PREFIX
from services.common.serving.modality_config import ServingLimits
from services.common.status import bounded
from services.common.grpc_server import grpc_options
from services.common.qos import DEFAULT_CLASSES, QosClass
from services.common.tracing.spans import batch_span, current_span_context
from services.router.config import Upstream
from services.router.fair_queue import Job
from services.common.batch_loop import BatchReport
from services.router.scheduler import FairScheduler, Requester
from services.router.upstream_client import UpstreamClient, UpstreamSecurity

log = logging.getLogger(__name__)

Row = dict[str, np.ndarray]
#: What a batch gives each job: its row, or the error of that item alone.
RowOrError = Row | Exception
#: Pseudo output added to every row: a JSON list of [model name, version] pairs.
MODELS_OUTPUT = "_models"
#: The ModelInferResponse parameter our modality services fill with the same JSON.
MODELS_PARAMETER = "models"
#: Reconnect to a modality service that went away within half a second of it serving again. gRPC's
#: default connection backoff starts at 1 s and grows 1.6x per failed attempt (up to 120 s, with 20 %
#: jitter: grpc doc/connection-backoff.md), so a channel whose service was down for 6 s may try again
#: only 4 s after the restarted service serves, and every item meanwhile is answered degraded. A
#: refused connect to a service that is down costs next to nothing, so retry often.
RECONNECT_OPTIONS = [("grpc.initial_reconnect_backoff_ms", 100), ("grpc.max_reconnect_backoff_ms", 500)]
#: Per call across every address the upstream's name resolves to (`dns:///auditmesh-text:8101`: a
#: Kubernetes headless Service lists each pod): gRPC connects to all of them and spreads calls round
#: robin over those that are up. One address behaves as before. Re-resolved when a connection closes
#: (e.g. at the service's `max_connection_age_s`), so new replicas are picked up.
LOAD_BALANCING_OPTIONS = [("grpc.lb_policy_name", "round_robin")]


class UpstreamError(RuntimeError):
    """A modality service failed or is unreachable. Fusion turns it into a degradation."""


class ModelUnloadedError(UpstreamError):
    """The modality service answers but does not serve the model (NOT_FOUND: unloaded, or never
    loaded). Reported as its own degradation; the policy's `failure.model_unloaded` says how it counts."""


@dataclass(frozen=True)
class _Payload:
    """One item's input for the upstream and the span of the request that queued it."""

    data: bytes
    origin: SpanContext

    @property
    def nbytes(self) -> int:
        """What it adds to a request (counted against the byte budget by fair_queue)."""
        return len(self.data) + BYTES_PREFIX


class _Refused(Exception):
    """The upstream refused a request because of its content (INVALID_ARGUMENT, or over a size limit)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


#: Words of a RESOURCE_EXHAUSTED message that say the request itself was too big (gRPC's own message
#: limit, or our services' `limits.*`), as against a full queue (an overloaded service).
_SIZE_MARKERS = ("larger than max", "limits.max_")


class ModalityDispatcher:
    """Schedules and batches items for one model on one modality service.

    Example::

        ocr = ModalityDispatcher("ocr", upstream, input_name="IMAGE", output_names=("LINES", "ERROR"))
        ocr.start()
        rows = await ocr.submit(Requester("acme", priority=0), [png_bytes], deadline=time.monotonic() + 1.0)
        rows[0]["LINES"]   # array([b'[{"text": ...}]'], dtype=object)
    """

    def __init__(self, modality: str, upstream: Upstream, *, input_name: str, output_names: Sequence[str],
                 max_message_bytes: int = 64 * 1024 * 1024, qos_classes: Sequence[QosClass] = DEFAULT_CLASSES,
                 on_batch: Callable[[str, BatchReport], None] | None = None,
                 security: UpstreamSecurity = UpstreamSecurity()) -> None:
        self.modality = modality
        self.upstream = upstream
        self.limits = upstream.limits or ServingLimits()
        self._note = RateLimitedNote(log, 5.0)
        self.input_name = input_name
        self.output_names = tuple(output_names)
        options = [*grpc_options(max_message_bytes), *RECONNECT_OPTIONS, *LOAD_BALANCING_OPTIONS]
        # One client per class (grpc.dscp is a per-channel option): index = class priority. With tracing on,
        # each has a second, uninstrumented channel for unsampled calls (upstream_client.py).
        self._clients = [UpstreamClient(upstream.url, channel_args=[*options, ("grpc.dscp", qos.dscp)], security=security)
                         for qos in qos_classes]
        report = functools.partial(on_batch, modality) if on_batch is not None else None
        scheduling = upstream.scheduling
        if not scheduling.max_batch_bytes:  # batches fit one request of the upstream
            scheduling = replace(scheduling, max_batch_bytes=self.limits.max_request_bytes)
        self.budget_bytes = scheduling.max_batch_bytes
        self.scheduler: FairScheduler[RowOrError] = FairScheduler(self._run_batch, config=scheduling, on_batch=report)

    def start(self) -> None:
        self.scheduler.start()

    async def close(self) -> None:
        await self.scheduler.close()
        for client in self._clients:
            await client.close()

    def overloaded(self, requester: Requester) -> bool:
        """True when this requester's expected wait here is over the upstream's `overload_wait_ms`."""
        return self.scheduler.overloaded(requester)

    async def submit(self, requester: Requester, payloads: Sequence[bytes], deadline: float) -> list[Row]:
        """One output row per payload, or DeadlineExceededError (also raised at once when the deadline
        cannot be met), QueueFullError, UpstreamError, or (the item's own fault) LimitExceededError /
        InvalidRequestError."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise DeadlineExceededError(f"deadline exceeded before the {self.modality} stage")
        origin = current_span_context()  # the request's span: the batch span links back to it
        jobs = [_Payload(payload, origin) for payload in payloads]
        for job in jobs:
            if job.nbytes > self.budget_bytes or len(job.data) > self.limits.max_row_bytes:
                raise LimitExceededError(f"an input of {len(job.data)} bytes is over what the {self.modality} service "
                                         f"takes ({min(self.budget_bytes - BYTES_PREFIX, self.limits.max_row_bytes)} bytes)")
        try:
            rows = await self.scheduler.submit(requester, jobs, deadline, timeout_s=remaining)
        except TimeoutError:
            raise DeadlineExceededError(f"deadline exceeded waiting for the {self.modality} stage") from None
        for row in rows:
            if isinstance(row, Exception):
                raise row
        return [row for row in rows if not isinstance(row, Exception)]

    async def describe_models(self, timeout_s: float = 2.0) -> list[tuple[str, str]]:
        """(name, version) of the served model and of the files behind it, from KServe ModelConfig.

        Our services list their ONNX files as `file:<name>` parameters; a Triton server reports only the
        model itself. Errors (service down) give an empty list; the caller may ask again later.
        """
        upstream = self.upstream
        try:
            response = await self._clients[0].get_model_config(upstream.model, upstream.model_version,
                                                               client_timeout=timeout_s)
        except InferenceServerException:
            return []
        config = response.config
        warm = config.parameters.get("warmup")
        if warm is not None and not self.scheduler.cost.seeded:
            self.scheduler.cost.seed(*parse_warmup(warm.string_value))
        versions = [(config.name, upstream.model_version or "1")]
        for key, value in sorted(config.parameters.items()):
            if key.startswith("file:"):
                fields = dict(part.split("=", 1) for part in value.string_value.split() if "=" in part)
                versions.append((key[len("file:"):], fields.get("version", "")))
        return versions

    async def _run_batch(self, batch: list[Job]) -> list[RowOrError]:
        """Rows for `batch`; when the upstream refuses it for its content, each item alone (see the
        module docstring), so that only the item at fault gets the error."""
        try:
            return list(await self._infer(batch))
        except _Refused as refused:
            if len(batch) == 1:
                return [_item_error(self.modality, refused)]
        results = await asyncio.gather(*(self._run_batch([job]) for job in batch))
        return [result for alone in results for result in alone]

    async def _infer(self, batch: list[Job]) -> list[Row]:
        timeout = max(job.deadline for job in batch) - time.monotonic()
        if timeout <= 0:
            raise DeadlineExceededError(f"deadline exceeded before the {self.modality} call was sent")
        tensor = InferInput(self.input_name, [len(batch), 1], "BYTES")
        tensor.set_data_from_numpy(np.array([[job.payload.data] for job in batch], dtype=np.object_))
        outputs = [InferRequestedOutput(name) for name in self.output_names]
        top = min(job.priority for job in batch)
        client = self._clients[min(top, len(self._clients) - 1)]
        try:
            with batch_span(f"dispatch {self.modality}", [job.payload.origin for job in batch],
                            {"auditmesh.upstream": self.modality}):
                result = await client.infer(self.upstream.model, [tensor], model_version=self.upstream.model_version,
                                            outputs=outputs, client_timeout=timeout, priority=top + 1)
        except InferenceServerException as error:
            raise self._classify(error, len(batch)) from None
        del tensor  # the request's copy of the inputs: not kept while the outputs are decoded
        arrays = {name: result.as_numpy(name) for name in self.output_names}
        for name, array in arrays.items():
            if array is None or array.shape[0] != len(batch):
                raise UpstreamError(f"{self.modality} service returned a malformed {name!r} output")
        models = np.array([models_json(result.get_response())], dtype=np.object_)
        return [{**{name: array[i] for name, array in arrays.items()}, MODELS_OUTPUT: models} for i in range(len(batch))]

    def _classify(self, error: InferenceServerException, size: int) -> Exception:
        """The error a failed call becomes: the deadline, a refusal of the content, or a stage failure
        whose reason names the service and the code only (the details go to the log)."""
        status = str(error.status() or "").rpartition(".")[2] or "UNKNOWN"
        message = str(error.message() or "")
        if status == "DEADLINE_EXCEEDED":
            return DeadlineExceededError(f"deadline exceeded in the {self.modality} service")
        if status == "NOT_FOUND":
            return ModelUnloadedError(f"{self.modality} service: model {self.upstream.model!r} not loaded (NOT_FOUND)")
        if status == "INVALID_ARGUMENT" or (status == "RESOURCE_EXHAUSTED"
                                            and any(marker in message for marker in _SIZE_MARKERS)):
            return _Refused(status, message)
        self._note.note("%s service %s failed a batch of %d: %s: %s", self.modality, self.upstream.url, size, status,
                        bounded(message))
        if status == "UNAVAILABLE":
            return UpstreamError(f"{self.modality} service unavailable (UNAVAILABLE)")
        if status == "RESOURCE_EXHAUSTED":
            return UpstreamError(f"{self.modality} service overloaded (RESOURCE_EXHAUSTED)")
        return UpstreamError(f"{self.modality} service failed ({status})")

def _item_error(modality: str, refused: _Refused) -> Exception:
    """The error of one item the upstream refused: its own status, with the service's (bounded) reason."""
    text = f"the {modality} service refused this input: {bounded(str(refused))}"
    return LimitExceededError(text) if refused.code == "RESOURCE_EXHAUSTED" else InvalidRequestError(text)


def parse_warmup(value: str) -> tuple[int, float]:
    """(items, seconds) from our services' ModelConfig `warmup` parameter ("items=1 seconds=0.160"; a
    warm run of the model's warm-up, seeding the scheduler's batch cost); (0, 0.0) when malformed.

    Example::

        parse_warmup("items=17 seconds=0.512")   # (17, 0.512)
    """
    fields = dict(part.split("=", 1) for part in value.split() if "=" in part)
    try:
        return int(fields["items"]), float(fields["seconds"])
    except (KeyError, ValueError):
        return 0, 0.0


def models_json(response: Any) -> str:
    """The model versions a ModelInferResponse names (JSON list of [name, version])."""
    parameter = response.parameters.get(MODELS_PARAMETER) if response.parameters else None
    if parameter is not None and parameter.string_param:
        return str(parameter.string_param)
    return json.dumps([[response.model_name, response.model_version or "1"]])


def models_of(row: Mapping[str, np.ndarray]) -> list[tuple[str, str]]:
    """The (name, version) pairs in a row's MODELS_OUTPUT."""
    return [(str(name), str(version)) for name, version in json.loads(row[MODELS_OUTPUT][0])]
