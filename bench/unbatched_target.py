"""The `unbatched` baseline: the modality services called one item per RPC, no router, no QoS.

This is the "second-generation" design the router is measured against: a client (or a thin gateway)
calls each model service once per item. The services run with `batching.max_batch_size: 1` (see
`bench/meshes.py`), so they never merge items either. An image item does what the router's pipeline
does, per item: vision and OCR concurrently, then one text call per OCR line. Each call asks for
the outputs the router asks for (the modality contracts' `ROUTER_OUTPUTS`, text contract v3) and its
row is decoded by the same contract (`decode_row`), so a response the router could not use is a
failure here too (status `MALFORMED`). Fusion is skipped (it costs well under a millisecond), and
there is no router hop, so this baseline is, if anything, flattered.

Example::

    send = UnbatchedSender(clients, inputs, deadlines_s={"text": 0.5, "image": 4.0})
    await send(Arrival(0.0, "image", "any", 0))   # "OK"
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Callable, Mapping

import numpy as np
import tritonclient.grpc.aio as triton_aio
from tritonclient.grpc import InferInput, InferRequestedOutput
from tritonclient.utils import InferenceServerException

from bench.loadgen import Arrival
from bench.payloads import BenchInputs
from services.common.contracts import ocr as ocr_contract
from services.common.contracts import text as text_contract
from services.common.contracts import vision as vision_contract
from services.common.contracts.rows import MalformedRowError
from services.launcher import Mesh

#: (model, input tensor, output tensors) per modality service, as the router calls them (the shipped
#: config/router.yaml models, and each contract's ROUTER_OUTPUTS).
MODELS = {"text": (text_contract.MODEL_NAME, text_contract.INPUT.name, text_contract.ROUTER_OUTPUTS),
          "vision": ("image_safety", vision_contract.INPUT.name, vision_contract.ROUTER_OUTPUTS),
          "ocr": ("ocr", ocr_contract.INPUT.name, ocr_contract.ROUTER_OUTPUTS)}
#: Each modality's row decoder (the router's: services/router/pipeline.py).
DECODERS: Mapping[str, Callable[[Mapping[str, np.ndarray]], Any]] = {
    "text": text_contract.decode_row, "vision": vision_contract.decode_row, "ocr": ocr_contract.decode_row}


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
                await self.infer("text", payload, deadline)
            else:
                await self._image(payload, deadline)
        except StageFailed as failure:
            return failure.code
        return "OK"

    async def _image(self, payload: bytes, deadline: float) -> None:
        _, ocr = await asyncio.gather(self.infer("vision", payload, deadline), self.infer("ocr", payload, deadline))
        await asyncio.gather(*(self.infer("text", line.text.encode("utf-8"), deadline) for line in ocr.lines))

    async def infer(self, modality: str, payload: bytes, deadline: float) -> Any:
        """The modality's decoded row for one payload (StageFailed on an error status or a malformed row)."""
        result = await self._call(modality, payload, deadline)
        _, _, output_names = MODELS[modality]
        try:
            return DECODERS[modality]({name: result.as_numpy(name)[0] for name in output_names})
        except (MalformedRowError, TypeError, IndexError):  # TypeError: an output missing (as_numpy gave None)
            raise StageFailed("MALFORMED") from None

    async def _call(self, modality: str, payload: bytes, deadline: float) -> Any:
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
