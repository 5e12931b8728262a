"""Batch sizes and model compute time from each modality service's KServe `ModelStatistics`.

The services count, per model, inferences (items) and executions (batches) and the nanoseconds spent
computing, like Triton does. Reading them before and after a load step gives, for that step only:
mean batch size = Δinference_count / Δexecution_count, and compute time per batch and per item.
Works unchanged against a Triton Inference Server.

Example::

    probe = StatsProbe(clients)                 # modality -> tritonclient.grpc.aio client
    before = await probe.snapshot()
    ...                                         # run load
    StatsProbe.delta(before, await probe.snapshot())["text"]["mean_batch_size"]   # e.g. 7.4
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import tritonclient.grpc.aio as triton_aio

from bench.unbatched_target import MODELS
from services.launcher import Mesh


@dataclass(frozen=True)
class ModelCounters:
    """Cumulative counters of one model, as read from ModelStatistics."""

    inference_count: int = 0
    execution_count: int = 0
    compute_ns: int = 0


def counters_from(response: Any, model: str) -> ModelCounters:
    """The counters of `model` in a ModelStatisticsResponse (zeros if the model is not listed)."""
    for entry in response.model_stats:
        if entry.name == model:
            return ModelCounters(int(entry.inference_count), int(entry.execution_count),
                                 int(entry.inference_stats.compute_infer.ns))
    return ModelCounters()


def step_stats(before: ModelCounters, after: ModelCounters) -> dict[str, float | int | None]:
    """What one model did between two readings: items, batches, mean batch size, compute ms.

    Example::

        >>> step_stats(ModelCounters(10, 10, 0), ModelCounters(50, 15, 20_000_000))
        {'inferences': 40, 'executions': 5, 'mean_batch_size': 8.0, 'compute_ms_per_batch': 4.0, 'compute_ms_per_item': 0.5}
    """
    items = after.inference_count - before.inference_count
    batches = after.execution_count - before.execution_count
    compute_ms = (after.compute_ns - before.compute_ns) / 1e6
    return {"inferences": items, "executions": batches,
            "mean_batch_size": round(items / batches, 2) if batches else None,
            "compute_ms_per_batch": round(compute_ms / batches, 3) if batches else None,
            "compute_ms_per_item": round(compute_ms / items, 3) if items else None}


class StatsProbe:
    """Reads the counters of each modality service's model (see the module docstring)."""

    def __init__(self, clients: Mapping[str, triton_aio.InferenceServerClient]) -> None:
        self._clients = dict(clients)

    async def snapshot(self) -> dict[str, ModelCounters]:
        """Current counters per modality."""
        readings = {}
        for modality, client in self._clients.items():
            model = MODELS[modality][0]
            response = await client.get_inference_statistics(model_name=model, client_timeout=5.0,
                                                             headers=dict(Mesh.internal_metadata()))
            readings[modality] = counters_from(response, model)
        return readings

    @staticmethod
    def delta(before: Mapping[str, ModelCounters], after: Mapping[str, ModelCounters]) -> dict[str, dict[str, float | int | None]]:
        """`step_stats` per modality."""
        return {modality: step_stats(before[modality], after[modality]) for modality in after if modality in before}
