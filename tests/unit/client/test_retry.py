"""auditmesh.client.retry: what is retried, after how long, and never past the deadline."""

from __future__ import annotations

import random

import pytest

from auditmesh.client.retry import RetryPolicy

POLICY = RetryPolicy(max_attempts=4, initial_backoff_s=0.1, max_backoff_s=0.4, multiplier=2.0, retry_info_jitter=0.1)


def delay(code: str, message: str = "", retry_after: float | None = None, *, attempts: int = 1,
          remaining_s: float = 10.0, seed: int = 0) -> float | None:
    return POLICY.delay_s(attempts, code, message, retry_after, remaining_s=remaining_s, rng=random.Random(seed))


def test_retry_info_is_honoured_with_a_little_jitter_above_it() -> None:
    delays = [delay("RESOURCE_EXHAUSTED", "over quota", 0.5, seed=seed) for seed in range(50)]
    assert all(d is not None and 0.5 <= d <= 0.55 for d in delays)
    assert len(set(delays)) > 40  # callers told the same delay do not come back together


def test_retry_info_on_another_code_is_honoured_too() -> None:
    assert delay("UNAVAILABLE", "draining", 0.3) == pytest.approx(0.3, rel=0.1)


def test_backoff_grows_exponentially_with_equal_jitter_up_to_the_cap() -> None:
    for attempts, ceiling in [(1, 0.1), (2, 0.2), (3, 0.4)]:
        values = [delay("UNAVAILABLE", attempts=attempts, seed=seed) for seed in range(30)]
        assert all(v is not None and ceiling / 2 <= v <= ceiling for v in values), (attempts, values)
    capped = RetryPolicy(max_attempts=10, initial_backoff_s=0.1, max_backoff_s=0.4)
    assert capped.backoff_s(8, random.Random(1)) <= 0.4


@pytest.mark.parametrize("code,message", [("UNAVAILABLE", "connection refused"), ("CANCELLED", ""),
                                          ("RESOURCE_EXHAUSTED", "Concurrent RPC limit exceeded!")])
def test_transient_refusals_without_retry_info_back_off(code: str, message: str) -> None:
    assert delay(code, message) is not None


@pytest.mark.parametrize("code,message", [
    ("RESOURCE_EXHAUSTED", "text has 30000 code points; the limit is 20000"),  # a size limit: same answer again
    ("INVALID_ARGUMENT", "items[0].parts[0]: empty text"), ("UNAUTHENTICATED", "unknown API key"),
    ("PERMISSION_DENIED", "served by lane 'bulk'"), ("DEADLINE_EXCEEDED", "shed"), ("INTERNAL", "bug")])
def test_permanent_errors_are_never_retried(code: str, message: str) -> None:
    assert delay(code, message) is None


def test_no_retry_after_the_last_attempt() -> None:
    assert delay("UNAVAILABLE", attempts=3) is not None
    assert delay("UNAVAILABLE", attempts=4) is None


def test_no_retry_whose_wait_outlives_the_deadline() -> None:
    assert delay("RESOURCE_EXHAUSTED", "over quota", 0.5, remaining_s=0.4) is None
    assert delay("RESOURCE_EXHAUSTED", "over quota", 0.5, remaining_s=0.6) is not None
    assert delay("UNAVAILABLE", remaining_s=0.04) is None   # backoff is at least 0.05


@pytest.mark.parametrize("kwargs,field", [({"max_attempts": 0}, "max_attempts"), ({"initial_backoff_s": 0}, "initial_backoff_s"),
                                          ({"initial_backoff_s": 2.0, "max_backoff_s": 1.0}, "max_backoff_s"),
                                          ({"multiplier": 0.5}, "multiplier"), ({"retry_info_jitter": 2.0}, "retry_info_jitter")])
def test_bad_settings_are_refused_naming_the_field(kwargs: dict[str, float], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        RetryPolicy(**kwargs)  # type: ignore[arg-type]
