"""The one place where the router queues items for a modality service and sends them in batches.

Each `ModalityDispatcher` owns a DynamicBatcher: items from all concurrent requests for, say, the OCR
service are merged into one KServe v2 `ModelInfer` call (tensor [N, 1] of BYTES) sent with
`tritonclient.grpc.aio`, so a Triton Inference Server can stand in for any modality service. The
downstream call carries a gRPC deadline equal to the latest deadline in the batch; each caller still
waits only until its own deadline, and a caller that gives up leaves the queue at once.

The tenant-fair scheduler (a later stage) replaces the batcher here; nothing else queues work.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import tritonclient.grpc.aio as triton_aio
from tritonclient.grpc import InferInput, InferRequestedOutput
from tritonclient.utils import InferenceServerException

from services.common.batcher import DynamicBatcher
from services.common.errors import DeadlineExceededError
from services.common.grpc_server import grpc_options
from services.router.config import Upstream

Row = dict[str, np.ndarray]


class UpstreamError(RuntimeError):
    """A modality service failed or is unreachable. Fusion turns it into a degradation."""


@dataclass(frozen=True)
class _Work:
    payload: bytes
    deadline: float


class ModalityDispatcher:
    """Batches items for one model on one modality service.

    Example::

        ocr = ModalityDispatcher("ocr", upstream, input_name="IMAGE", output_names=("LINES", "ERROR"))
        ocr.start()
        rows = await ocr.submit([png_bytes], deadline=time.monotonic() + 1.0)
        rows[0]["LINES"]   # array([b'[{"text": ...}]'], dtype=object)
    """

    def __init__(self, modality: str, upstream: Upstream, *, input_name: str, output_names: Sequence[str],
                 max_message_bytes: int = 64 * 1024 * 1024) -> None:
        self.modality = modality
        self.upstream = upstream
        self.input_name = input_name
        self.output_names = tuple(output_names)
        self._client = triton_aio.InferenceServerClient(upstream.url, channel_args=grpc_options(max_message_bytes))
        self._batcher: DynamicBatcher[_Work, Row] = DynamicBatcher(self._run_batch, config=upstream.batching)
        self._recent_rtt: deque[float] = deque(maxlen=32)

    def start(self) -> None:
        self._batcher.start()

    async def close(self) -> None:
        await self._batcher.close()
        await self._client.close()

    @property
    def fastest_recent_s(self) -> float:
        """The quickest recent round trip: a deadline shorter than this cannot be met."""
        return min(self._recent_rtt, default=0.0)

    async def submit(self, payloads: Sequence[bytes], deadline: float) -> list[Row]:
        """Queue `payloads` and return one output row per payload, or raise DeadlineExceededError /
        UpstreamError. Rejects at once when the deadline is shorter than the service's fastest time."""
        remaining = deadline - time.monotonic()
        if remaining <= self.fastest_recent_s:
            raise DeadlineExceededError(
                f"deadline too short for the {self.modality} stage: {remaining * 1000:.0f} ms left, "
                f"its fastest recent call took {self.fastest_recent_s * 1000:.0f} ms")
        try:
            return await asyncio.wait_for(self._batcher.submit([_Work(p, deadline) for p in payloads]), remaining)
        except asyncio.TimeoutError:
            raise DeadlineExceededError(f"deadline exceeded waiting for the {self.modality} stage") from None

    async def _run_batch(self, batch: list[_Work]) -> list[Row]:
        timeout = max(work.deadline for work in batch) - time.monotonic()
        if timeout <= 0:
            raise DeadlineExceededError(f"deadline exceeded before the {self.modality} call was sent")
        tensor = InferInput(self.input_name, [len(batch), 1], "BYTES")
        tensor.set_data_from_numpy(np.array([[work.payload] for work in batch], dtype=np.object_))
        outputs = [InferRequestedOutput(name) for name in self.output_names]
        started = time.monotonic()
        try:
            result = await self._client.infer(self.upstream.model, [tensor], model_version=self.upstream.model_version,
                                              outputs=outputs, client_timeout=timeout)
        except InferenceServerException as error:
            status = str(error.status() or "")
            if "DEADLINE_EXCEEDED" in status:
                raise DeadlineExceededError(f"deadline exceeded in the {self.modality} service") from None
            raise UpstreamError(f"{self.modality} service {self.upstream.url} failed: {error.message()}") from None
        self._recent_rtt.append(time.monotonic() - started)
        arrays = {name: result.as_numpy(name) for name in self.output_names}
        for name, array in arrays.items():
            if array is None or array.shape[0] != len(batch):
                raise UpstreamError(f"{self.modality} service returned a malformed {name!r} output")
        return [{name: array[i] for name, array in arrays.items()} for i in range(len(batch))]


async def describe_models(dispatcher: ModalityDispatcher, timeout_s: float = 2.0) -> list[tuple[str, str]]:
    """(name, version) of the served model and of the files behind it, from KServe ModelConfig.

    Our services list their ONNX files as `file:<name>` parameters; a Triton server reports only the
    model itself. Errors (service down) give an empty list; the caller may ask again later.
    """
    upstream = dispatcher.upstream
    try:
        response = await dispatcher._client.get_model_config(upstream.model, upstream.model_version, client_timeout=timeout_s)
    except InferenceServerException:
        return []
    config = response.config
    versions = [(config.name, upstream.model_version or "1")]
    for key, value in sorted(config.parameters.items()):
        if key.startswith("file:"):
            fields = dict(part.split("=", 1) for part in value.string_value.split() if "=" in part)
            versions.append((key[len("file:"):], fields.get("version", "")))
    return versions
