"""FairQueue with explicit times: fairness bound, priorities, starvation guard, deadline cuts, removal."""

from __future__ import annotations

import pytest

from services.router.batch_cost import BatchCost, CostEstimate
from services.router.fair_queue import FairQueue, Job


def job(tenant: str, priority: int = 1, *, at: float = 0.0, deadline: float = 100.0, weight: float = 1.0) -> Job:
    return Job(tenant, priority, weight, deadline, at, payload=f"{tenant}@{at}")


def tenants(batch: list[Job]) -> list[str]:
    return [j.tenant for j in batch]


def test_light_tenant_is_served_within_one_batch_of_a_flood() -> None:
    queue = FairQueue()
    for i in range(100):
        queue.push(job("flood", at=i * 0.001))
    first, _ = queue.pop_batch(0.2, 8)
    assert tenants(first) == ["flood"] * 8
    queue.push(job("light", at=0.21))
    second, _ = queue.pop_batch(0.21, 8)
    assert "light" in tenants(second)


def test_backlogged_tenants_alternate_by_weight() -> None:
    queue = FairQueue()
    for i in range(30):
        queue.push(job("a", at=i * 1e-4))
        queue.push(job("b", at=i * 1e-4, weight=2.0))
    batch, _ = queue.pop_batch(0.01, 9)
    assert tenants(batch).count("b") == 6 and tenants(batch).count("a") == 3  # b has twice a's weight


def test_idle_tenant_earns_no_credit() -> None:
    queue = FairQueue()
    for i in range(20):
        queue.push(job("a", at=i * 1e-3))
    queue.pop_batch(0.05, 10)  # a has received 10 items of service
    queue.push(job("b", at=0.06))  # b arrives now, lifted to a's counter
    queue.push(job("b", at=0.061))
    batch, _ = queue.pop_batch(0.07, 4)
    assert sorted(tenants(batch)) == ["a", "a", "b", "b"]  # alternation, not b-first catch-up


def test_strict_priority_between_classes() -> None:
    queue = FairQueue(starvation_limit_s=10)
    for i in range(5):
        queue.push(job("bulk", priority=2, at=0.0))
    queue.push(job("chat", priority=0, at=0.01))
    batch, _ = queue.pop_batch(0.02, 3)
    assert tenants(batch) == ["chat", "bulk", "bulk"]


def test_starvation_guard_gives_old_low_priority_work_a_share() -> None:
    queue = FairQueue(starvation_limit_s=0.2, starvation_share=0.25)
    queue.push(job("bulk", priority=2, at=0.0))
    queue.push(job("bulk", priority=2, at=0.0))
    for i in range(20):
        queue.push(job("chat", priority=0, at=0.25))
    fresh, _ = queue.pop_batch(0.1, 8)
    assert tenants(fresh) == ["chat"] * 8  # bulk has not waited long enough yet
    starving, _ = queue.pop_batch(0.3, 8)
    assert tenants(starving) == ["bulk", "bulk"] + ["chat"] * 6


def test_batch_is_cut_to_meet_every_deadline_and_hopeless_jobs_are_shed() -> None:
    queue = FairQueue()
    cost = CostEstimate(per_item_s=0.01, fixed_s=0.02)  # batch of n takes 20 + 10n ms
    queue.push(job("a", at=0.0, deadline=0.025))  # cannot finish even alone (needs 30 ms)
    queue.push(job("b", at=0.0, deadline=0.065))  # fits a batch of up to 4
    for i in range(6):
        queue.push(job("c", at=0.0, deadline=1.0))
    batch, shed = queue.pop_batch(0.0, 8, cost)
    assert tenants(shed) == ["a"]
    assert len(batch) == 4 and "b" in tenants(batch)
    assert len(queue) == 3  # the rest stays queued
    rest, _ = queue.pop_batch(0.1, 8, cost)
    assert tenants(rest) == ["c"] * 3


def test_removed_job_leaves_the_queue_at_once() -> None:
    queue = FairQueue()
    doomed, kept = job("a", at=0.0), job("a", at=0.001)
    queue.push(doomed)
    queue.push(kept)
    assert queue.remove(doomed) and len(queue) == 1
    assert not queue.remove(doomed)
    batch, _ = queue.pop_batch(0.01, 8)
    assert batch == [kept]


def test_jobs_ahead_counts_fair_interleaving() -> None:
    queue = FairQueue()
    for i in range(50):
        queue.push(job("flood", priority=1))
    queue.push(job("vip", priority=0))
    assert queue.jobs_ahead("light", 1) == 1 + 1  # the vip item, then one flood item interleaved
    assert queue.jobs_ahead("flood", 1) == 1 + 50


def test_batch_cost_fit_recovers_a_line() -> None:
    cost = BatchCost(window=16)
    assert cost.estimate() is None and cost.predict(4) == 0.0
    for n in (1, 2, 4, 8, 16, 1, 8):
        cost.observe(n, 0.005 + 0.002 * n)
    estimate = cost.estimate()
    assert estimate is not None
    assert estimate.per_item_s == pytest.approx(0.002) and estimate.fixed_s == pytest.approx(0.005)


@pytest.mark.parametrize("kwargs", [{"starvation_limit_s": 0}, {"starvation_share": 0}, {"starvation_share": 1.5}])
def test_bad_settings_name_the_field(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        FairQueue(**kwargs)


def sized(tenant: str, nbytes: int, *, at: float = 0.0) -> Job:
    return Job(tenant, 1, 1.0, 100.0, at, payload=f"{tenant}@{at}", nbytes=nbytes)


def test_batches_are_cut_by_bytes_as_well_as_by_count() -> None:
    """Issue 12 item 1: six 10 MB images in one 60 MB batch went over the upstream's message limit."""
    queue = FairQueue()
    for i in range(6):
        queue.push(sized("a", 10_000_000, at=i * 1e-3))
    queue.push(sized("b", 1_000, at=0.01))
    sizes = []
    while len(queue):
        batch, _ = queue.pop_batch(1.0, 16, max_bytes=32_000_000)
        assert sum(j.nbytes for j in batch) <= 32_000_000
        sizes.append(len(batch))
    assert sum(sizes) == 7 and max(sizes) <= 4


def test_a_job_bigger_than_the_byte_budget_goes_alone_and_the_rest_keep_their_order() -> None:
    queue = FairQueue()
    queue.push(sized("a", 50, at=0.0))
    queue.push(sized("a", 500, at=0.1))
    queue.push(sized("a", 50, at=0.2))
    first, _ = queue.pop_batch(1.0, 8, max_bytes=100)
    second, _ = queue.pop_batch(1.0, 8, max_bytes=100)
    third, _ = queue.pop_batch(1.0, 8, max_bytes=100)
    assert [[j.nbytes for j in b] for b in (first, second, third)] == [[50], [500], [50]]


def test_a_payload_that_knows_its_size_counts_it() -> None:
    class Payload:
        nbytes = 123

    assert Job("a", 1, 1.0, 1.0, 0.0, payload=Payload()).nbytes == 123
    with pytest.raises(ValueError, match="max_bytes"):
        FairQueue().pop_batch(0.0, 1, max_bytes=0)
