"""The contract between a modality's model code and the shared KServe v2 server.

Every modality service (text, vision, OCR) exposes one or more *served models*. A served model is a
plain Python object that runs a batch of inputs through its ONNX Runtime sessions and returns a batch
of outputs. It knows nothing about gRPC: `services.common.serving.kserve_servicer` adapts it to the KServe v2
(Triton) `ModelInfer` RPC, batches concurrent requests into one `infer` call, and maps
`InvalidInputError` to INVALID_ARGUMENT.

Tensors follow KServe v2 conventions: the first dimension is the batch. `BYTES` tensors are numpy
arrays of dtype `object` whose elements are `bytes`; `FP32` tensors are `float32` arrays.

Example::

    class Echo:
        name = "echo"; version = "1"; platform = "onnxruntime_onnx"; max_batch_size = 8
        inputs = (TensorSpec("TEXT", "BYTES", (1,)),)
        outputs = (TensorSpec("LENGTH", "FP32", (1,)),)
        def infer(self, inputs):
            return {"LENGTH": np.array([[len(t[0])] for t in inputs["TEXT"]], np.float32)}
        def warmup(self) -> None: self.infer({"TEXT": np.array([[b"hi"]], object)})
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Protocol, Sequence

import numpy as np

from services.common.contracts.tensors import TensorSpec
from services.common.errors import InvalidInputError

@dataclass(frozen=True)
class ModelFile:
    """One ONNX file a served model uses, as recorded in the model repository."""

    name: str
    version: str
    path: str
    sha256: str = ""
    source: str = ""
    license: str = ""


class ServedModel(Protocol):
    """What a modality provides to the shared server. See the module docstring."""

    name: str
    version: str
    platform: str
    max_batch_size: int
    inputs: Sequence[TensorSpec]
    outputs: Sequence[TensorSpec]

    def infer(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Run one batch. Every input array has the same first (batch) dimension N; every output
        must have first dimension N too, in the same order. Raise InvalidInputError for bad input."""
        ...

    def warmup(self) -> None:
        """Run a representative batch once so the first real request is not slow."""
        ...

    def model_files(self) -> Sequence[ModelFile]:
        """The ONNX files behind this model (reported in metadata and responses as model versions)."""
        ...


@dataclass
class BatchStats:
    """Counters a served model's batcher keeps (reported through ModelStatistics)."""

    inference_count: int = 0
    execution_count: int = 0
    success_ns: int = 0
    fail_count: int = 0
    fail_ns: int = 0
    queue_ns: int = 0
    compute_ns: int = 0
    batch_sizes: dict[int, int] = field(default_factory=dict)
