"""One load step's report: achieved rate, per kind against the SLO, status counts, pass / fail."""

from __future__ import annotations

from bench.loadgen import Arrival, Outcome
from bench.scenarios import Slo
from bench.steps import step_report

SLO = Slo(p99_ms={"text": 50.0, "image": 1000.0})


def outcome(i: int, latency_s: float, code: str = "OK", kind: str = "text", tenant: str = "a") -> Outcome:
    at = i * 0.01
    return Outcome(Arrival(at, kind, tenant, i), scheduled=at, sent=at, done=at + latency_s, code=code)


def test_a_step_within_the_slo_passes() -> None:
    outcomes = [outcome(i, 0.010) for i in range(99)] + [outcome(99, 0.300, kind="image", tenant="b")]
    report = step_report(100.0, 1.0, outcomes, SLO)
    assert report["passed"] and report["sent"] == 100
    assert report["achieved_rps"] == round(100 / 1.29, 2)  # first send at 0, last answer at 0.99 + 0.3
    assert report["by_kind"]["text"]["p99_ms"] == 10.0 and report["by_kind"]["image"]["meets_slo"]
    assert report["by_tenant"]["b"] == {"n": 1, "ok": 1, "p99_ms": 300.0}
    assert report["status"] == {"OK": 100}


def test_a_slow_p99_fails_the_step() -> None:
    outcomes = [outcome(i, 0.010) for i in range(98)] + [outcome(98, 0.200), outcome(99, 0.200)]
    report = step_report(100.0, 1.0, outcomes, SLO)
    assert not report["passed"] and not report["by_kind"]["text"]["meets_slo"]


def test_errors_count_against_success_and_achieved_rate() -> None:
    outcomes = [outcome(i, 0.001, code="RESOURCE_EXHAUSTED" if i % 10 == 0 else "OK") for i in range(100)]
    report = step_report(100.0, 1.0, outcomes, SLO)
    assert not report["passed"] and report["success_ratio"] == 0.9 and report["achieved_rps"] == 90.0
    assert report["status"] == {"OK": 90, "RESOURCE_EXHAUSTED": 10}


def test_an_empty_step_fails() -> None:
    report = step_report(1.0, 1.0, [], SLO)
    assert not report["passed"] and report["latency_ms"] == {"n": 0}
