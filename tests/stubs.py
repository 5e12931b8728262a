"""Shared fakes for tests: in-memory tracing, a gated served model, a /metrics scraper, and the
batching fakes (a fake clock, a gated run_batch, `settle`)."""

from __future__ import annotations

import asyncio
import threading
import urllib.request
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Callable, Generic, Mapping, Sequence, TypeVar

import numpy as np
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client.parser import text_string_to_metric_families

from services.common.contracts.tensors import TensorSpec
from services.common.serving.model_api import ModelFile
from services.common.tracing.telemetry import install_tracing, shutdown_tracing

V = TypeVar("V")


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


# --- Batching fakes (the batch loop's contract tests, the batcher's and the scheduler's) ----------------


@dataclass
class FakeClock:
    """A monotonic clock that moves only when told to (`advance`, or set `now`)."""

    now: float = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class GatedBatchRun(Generic[V]):
    """A `run_batch` that records each batch's values, then waits for `release` (set at first) and
    'takes' `duration` on the fake clock; each result is `value * 10` (an int) or `str(value)`.
    `value_of` reads the value from what the batching front end hands over (a Job's payload, say).

    Example::

        run = GatedBatchRun(clock, value_of=lambda job: job.payload)
        run.release.clear()         # batches now wait inside run_batch until release.set()
    """

    def __init__(self, clock: FakeClock, *, value_of: Callable[[Any], V], duration: float = 0.01) -> None:
        self.clock, self.duration, self.value_of = clock, duration, value_of
        self.batches: list[list[V]] = []
        self.release = asyncio.Event()
        self.release.set()

    async def __call__(self, entries: Sequence[Any]) -> list[Any]:
        values = [self.value_of(entry) for entry in entries]
        self.batches.append(values)
        await self.release.wait()
        await asyncio.sleep(0)  # a batch takes at least one step of the event loop, as a real one does
        self.clock.advance(self.duration)
        return [value * 10 if isinstance(value, int) else str(value) for value in values]


async def settle(rounds: int = 8) -> None:
    """Let every ready task run a few steps (no time passes; the batching tests' only way to wait)."""
    for _ in range(rounds):
        await asyncio.sleep(0)
