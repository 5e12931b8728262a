"""The bulk flood's summary: rate actually sent, rejections and how fast they came back."""

from __future__ import annotations

from bench.flood import flood_report
from bench.loadgen import Arrival, Outcome


def test_rejection_latency_is_measured_from_the_send() -> None:
    outcomes = [Outcome(Arrival(i * 0.01, "text", "flood", i), scheduled=i * 0.01, sent=i * 0.01 + 0.005,
                        done=i * 0.01 + 0.005 + (0.002 if i % 2 else 0.020), code="RESOURCE_EXHAUSTED" if i % 2 else "OK")
                for i in range(11)]
    report = flood_report(100.0, outcomes)
    assert report["sent"] == 11 and report["sent_rps"] == 110.0
    assert report["status"] == {"OK": 6, "RESOURCE_EXHAUSTED": 5}
    assert report["rejection_latency_ms"]["p99_ms"] == 2.0
    assert report["rejection_latency_from_schedule_ms"]["p99_ms"] == 7.0
    assert report["ok_latency_ms"]["n"] == 6
