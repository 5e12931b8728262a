"""ModelRunner: which thread runs a batch. Bulk batches run on niced worker threads
(`background_nice`), realtime and standard ones at the service's own priority; small batches inline.
A real (tiny) model on real threads, no gRPC."""

from __future__ import annotations

import os
import threading
from typing import Mapping, Sequence

import numpy as np
import pytest

from services.common.contracts.tensors import TensorSpec
from services.common.serving.batcher import BatchingConfig
from services.common.serving.kserve_servicer import ModelRunner, lower_thread_priority
from services.common.serving.model_api import ModelFile


class ThreadRecordingModel:
    """Doubles its input; records the thread and its niceness for every batch."""

    name = "double"
    version = "1"
    platform = "test"
    max_batch_size = 16
    inputs: Sequence[TensorSpec] = (TensorSpec("X", "FP32", (1,)),)
    outputs: Sequence[TensorSpec] = (TensorSpec("Y", "FP32", (1,)),)

    def __init__(self) -> None:
        self.runs: list[tuple[str, int]] = []

    def infer(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        thread = threading.current_thread()
        self.runs.append((thread.name, os.getpriority(os.PRIO_PROCESS, threading.get_native_id())))
        return {"Y": inputs["X"] * 2}

    def warmup(self) -> None:
        pass

    def model_files(self) -> Sequence[ModelFile]:
        return ()


def row(value: float) -> dict[str, np.ndarray]:
    return {"X": np.array([value], dtype=np.float32)}


async def run_at(runner: ModelRunner, priority: int, count: int = 1) -> list[float]:
    out = await runner.submit([row(float(i)) for i in range(count)], priority)
    return [float(r["Y"][0]) for r in out]


async def test_bulk_batches_run_on_niced_threads_and_urgent_ones_at_the_services_priority() -> None:
    model = ThreadRecordingModel()
    own = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    runner = ModelRunner(model, BatchingConfig(max_batch_size=16, inline_max_batch_size=4, background_nice=5,
                                               background_priority=3))
    runner.batcher.start()
    assert await run_at(runner, 3, 2) == [0.0, 2.0]  # bulk: background thread, even though small
    assert await run_at(runner, 1, 2) == [0.0, 2.0]  # realtime, small: inline on the event loop
    assert await run_at(runner, 2, 8) == [2.0 * i for i in range(8)]  # standard, large: ordinary worker
    await runner.close()
    (bulk_thread, bulk_nice), (inline_thread, inline_nice), (worker_thread, worker_nice) = model.runs
    assert "background" in bulk_thread and bulk_nice == min(19, own + 5)
    assert inline_thread == threading.current_thread().name and inline_nice == own
    assert "background" not in worker_thread and worker_thread.startswith("model-double") and worker_nice == own


async def test_without_background_nice_bulk_runs_like_everything_else() -> None:
    model = ThreadRecordingModel()
    own = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    runner = ModelRunner(model, BatchingConfig(max_batch_size=16, inline_max_batch_size=4))
    runner.batcher.start()
    assert await run_at(runner, 3, 2) == [0.0, 2.0]
    await runner.close()
    assert model.runs == [(threading.current_thread().name, own)]


def test_lower_thread_priority_changes_only_the_calling_thread() -> None:
    own = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    seen: list[int] = []

    def body() -> None:
        lower_thread_priority(3)
        seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))

    worker = threading.Thread(target=body)
    worker.start()
    worker.join()
    assert seen == [min(19, own + 3)]
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == own


@pytest.mark.parametrize("kwargs, message", [
    ({"background_nice": 20}, "background_nice must be in 0..19, got 20"),
    ({"background_priority": 1}, "background_priority must be >= 2"),
    ({"gil_switch_interval_ms": 0}, "gil_switch_interval_ms must be in 0.05..100, got 0"),
])
def test_bad_background_settings_are_rejected(kwargs: dict[str, int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        BatchingConfig(**kwargs)

