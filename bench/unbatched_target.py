"""The `unbatched` baseline: the modality services called one item per RPC, no router, no QoS.

This is the "second-generation" design the router is measured against: a client (or a thin gateway)
calls each model service once per item. The services run with `batching.max_batch_size: 1` (see
`bench/meshes.py`), so they never merge items either. An image item does what the router's pipeline
does, per item: vision and OCR concurrently, then one text call per OCR line. Fusion is skipped (it
costs well under a millisecond), and there is no router hop, so this baseline is, if anything,
flattered.

Example::

    send = UnbatchedSender(clients, inputs, deadlines_s={"text": 0.5, "image": 4.0})
    await send(Arrival(0.0, "image", "any", 0))   # "OK"
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any, Mapping

import numpy as np
import tritonclient.grpc.aio as triton_aio
from tritonclient.grpc import InferInput, InferRequestedOutput
from tritonclient.utils import InferenceServerException

from bench.loadgen import Arrival
from bench.payloads import BenchInputs
from services.launcher import Mesh

#: (model, input tensor, output tensors) per modality service, as the router calls them.
MODELS = {"text": ("text_moderation", "TEXT", ("TOXICITY", "SPAM", "MATCHES")),
          "vision": ("image_safety", "IMAGE", ("SEXUAL", "VIOLENCE", "DETAILS", "ERROR")),
          "ocr": ("ocr", "IMAGE", ("LINES", "ERROR"))}


class StageFailed(Exception):
    """A modality call failed; `code` is the gRPC status name."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


def status_name(error: InferenceServerException) -> str:
    """'StatusCode.DEADLINE_EXCEEDED' (tritonclient's form) -> 'DEADLINE_EXCEEDED'."""
    return str(error.status() or "UNKNOWN").rsplit(".", 1)[-1]


class UnbatchedSender:
    """A `bench.loadgen.Sender` calling the modality services directly, one item per ModelInfer."""

    def __init__(self, clients: Mapping[str, triton_aio.InferenceServerClient], inputs: BenchInputs, *,
                 deadlines_s: Mapping[str, float]) -> None:
        self._clients = dict(clients)
        self._inputs = inputs
        self._deadlines_s = dict(deadlines_s)

    async def __call__(self, arrival: Arrival) -> str:
        deadline = time.monotonic() + self._deadlines_s[arrival.kind]
        payload = self._inputs.payload(arrival.kind, arrival.index)
        try:
            if arrival.kind == "text":
                await self._infer("text", payload, deadline)
            else:
                await self._image(payload, deadline)
        except StageFailed as failure:
            return failure.code
        return "OK"

    async def _image(self, payload: bytes, deadline: float) -> None:
        _, ocr = await asyncio.gather(self._infer("vision", payload, deadline), self._infer("ocr", payload, deadline))
        lines = json.loads(bytes(ocr.as_numpy("LINES")[0, 0]))
        await asyncio.gather(*(self._infer("text", line["text"].encode("utf-8"), deadline) for line in lines))

    async def _infer(self, modality: str, payload: bytes, deadline: float) -> Any:
        model, input_name, output_names = MODELS[modality]
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise StageFailed("DEADLINE_EXCEEDED")
        tensor = InferInput(input_name, [1, 1], "BYTES")
        tensor.set_data_from_numpy(np.array([[payload]], dtype=np.object_))
        try:
            return await self._clients[modality].infer(model, [tensor], client_timeout=remaining,
                                                       outputs=[InferRequestedOutput(n) for n in output_names],
                                                       headers=dict(Mesh.internal_metadata()))  # the mesh's secret
        except InferenceServerException as error:
            raise StageFailed(status_name(error)) from None
