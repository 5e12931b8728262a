"""Shared fakes for tests: in-memory tracing, a gated served model, a /metrics scraper, a KServe client
that authenticates to the mesh's internal ports."""

from __future__ import annotations

import functools
import threading
import urllib.request
from types import TracebackType
from typing import Any, Mapping, Sequence

import numpy as np
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client.parser import text_string_to_metric_families

from services.common.serving.model_api import ModelFile, TensorSpec
from services.common.tracing.telemetry import install_tracing, shutdown_tracing


class InMemoryTracing:
    """Tracing on (sample everything, export synchronously to memory) inside a `with` block.

    Example::

        with InMemoryTracing() as tracing:
            ...
            spans = tracing.named("/inference.GRPCInferenceService/ModelInfer")
    """

    def __init__(self, service_name: str = "auditmesh-test") -> None:
        self.service_name = service_name
        self.exporter = InMemorySpanExporter()

    def __enter__(self) -> InMemoryTracing:
        install_tracing(self.service_name, self.exporter, batch=False)
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        shutdown_tracing()

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, name: str) -> list[ReadableSpan]:
        return [span for span in self.spans() if span.name == name]


class GatedModel:
    """A served model (`LENGTH` of each `TEXT`) whose batches wait for `gate` while `hold` is set.

    `entered` is set when a batch starts; `batches` records each batch's size.
    """

    name = "gated"
    version = "1"
    platform = "onnxruntime_onnx"
    max_batch_size = 8
    inputs: Sequence[TensorSpec] = (TensorSpec("TEXT", "BYTES", (1,)),)
    outputs: Sequence[TensorSpec] = (TensorSpec("LENGTH", "FP32", (1,)),)

    def __init__(self) -> None:
        self.hold = threading.Event()
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.batches: list[int] = []

    def infer(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        texts = inputs["TEXT"]
        self.batches.append(len(texts))
        self.entered.set()
        if self.hold.is_set():
            self.gate.wait(10.0)
        return {"LENGTH": np.array([[len(t[0])] for t in texts], np.float32)}

    def warmup(self) -> None:
        self.infer({"TEXT": np.array([[b"hi"]], object)})

    def model_files(self) -> Sequence[ModelFile]:
        return ()


def scrape(port: int, host: str = "127.0.0.1") -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """GET /metrics and parse it: {(sample name, sorted labels): value}."""
    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=5) as response:
        text = response.read().decode("utf-8")
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def sample(samples: Mapping[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    """The value of one sample (0.0 when absent, as for a counter not yet incremented)."""
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


class MeshTritonClient:
    """tritonclient's (sync or aio) KServe client that sends the mesh's internal secret on every call
    (`Mesh.internal_metadata()`: the modality ports need it, services/common/internal_auth.py).

    Example::

        client = MeshTritonClient(triton.InferenceServerClient(mesh.address("text")), mesh.internal_metadata())
        client.infer("text_moderation", [tensor])
    """

    def __init__(self, client: Any, metadata: Sequence[tuple[str, str]]) -> None:
        self._client = client
        self._headers = dict(metadata)

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._client, name)
        if name == "close" or not callable(attribute):
            return attribute
        return functools.partial(attribute, headers=self._headers)
