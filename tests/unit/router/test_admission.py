"""Admission with explicit times: token bucket refill, burst, in-flight cap, retry hints."""

from __future__ import annotations

import pytest

from services.router.admission import Admission, OverQuotaError, Quota


def test_unlimited_quota_admits_everything() -> None:
    admission = Admission()
    for i in range(1000):
        admission.admit("t", Quota(), 10, now=i * 1e-6)
    assert admission.in_flight("t") == 10_000


def test_rate_quota_with_burst_and_refill() -> None:
    admission, quota = Admission(), Quota(items_per_s=10, burst=5)
    for _ in range(5):
        admission.admit("t", quota, 1, now=0.0)
    with pytest.raises(OverQuotaError) as caught:
        admission.admit("t", quota, 1, now=0.0)
    assert caught.value.retry_after_s == pytest.approx(0.1)
    assert "10 items/s" in str(caught.value)
    admission.admit("t", quota, 1, now=0.1)  # one token refilled
    with pytest.raises(OverQuotaError):
        admission.admit("t", quota, 2, now=0.15)
    admission.admit("other", quota, 5, now=0.15)  # tenants have separate buckets


def test_in_flight_cap_and_release() -> None:
    admission, quota = Admission(), Quota(max_in_flight=4)
    ticket = admission.admit("t", quota, 3, now=0.0)
    with pytest.raises(OverQuotaError, match="3 items in flight; the limit is 4"):
        admission.admit("t", quota, 2, now=0.0)
    admission.release(ticket)
    admission.admit("t", quota, 4, now=0.0)


def test_rejection_charges_nothing() -> None:
    admission, quota = Admission(), Quota(items_per_s=1, burst=2)
    with pytest.raises(OverQuotaError, match="over tenant 't''s burst"):
        admission.admit("t", quota, 3, now=0.0)
    admission.admit("t", quota, 2, now=0.0)
