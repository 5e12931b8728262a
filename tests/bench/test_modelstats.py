"""Batch sizes and compute time per step from KServe ModelStatistics counters."""

from __future__ import annotations

from tritonclient.grpc import service_pb2

from bench.modelstats import ModelCounters, counters_from, step_stats


def test_counters_are_read_from_a_model_statistics_response() -> None:
    response = service_pb2.ModelStatisticsResponse()
    entry = response.model_stats.add(name="ocr", version="1", inference_count=12, execution_count=4)
    entry.inference_stats.compute_infer.ns = 9_000_000
    assert counters_from(response, "ocr") == ModelCounters(12, 4, 9_000_000)
    assert counters_from(response, "text_moderation") == ModelCounters()


def test_step_stats_are_deltas() -> None:
    stats = step_stats(ModelCounters(100, 50, 10_000_000), ModelCounters(164, 52, 18_000_000))
    assert stats == {"inferences": 64, "executions": 2, "mean_batch_size": 32.0, "compute_ms_per_batch": 4.0,
                     "compute_ms_per_item": 0.125}


def test_step_stats_without_batches_have_no_means() -> None:
    stats = step_stats(ModelCounters(5, 5, 1), ModelCounters(5, 5, 1))
    assert stats["mean_batch_size"] is None and stats["compute_ms_per_item"] is None
