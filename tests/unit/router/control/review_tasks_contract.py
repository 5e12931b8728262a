"""The review-task queue contract (`ReviewTasks`), one check per behaviour for every queue: SQLite
(tests/unit/router/control/test_review_queue.py) and Redis Streams (tests/integration/test_review_tasks_redis.py).
`make(clock, **settings)` opens the queue under test (another call: another process on the same store)."""

from __future__ import annotations

from typing import Callable

import pytest

from services.common.errors import InvalidRequestError, LimitExceededError
from services.router.control.review_queue import ReviewTasks
from tests.stubs import FakeClock
from tests.unit.router.control.test_audit import record_for

MakeQueue = Callable[..., ReviewTasks]


def check_a_task_is_leased_then_delivered_again_unless_acked(make: MakeQueue) -> None:
    clock = FakeClock(1000.0)
    tasks = make(clock)
    tasks.offer(record_for("acme", item="m-1"), "review")
    tasks.offer(record_for("acme", item="m-2"), "sample_allow")
    assert tasks.flush() == 2 and tasks.buffered == 0
    first = tasks.lease("acme", limit=10, visibility_s=30.0)
    assert [(t.record.item_id, t.reason, t.deliveries) for t in first] == [("m-1", "review", 1), ("m-2", "sample_allow", 1)]
    assert tasks.lease("acme", limit=10, visibility_s=30.0) == []  # leased: not handed out twice
    assert tasks.leased("acme", [t.task_id for t in first]) == {t.task_id for t in first}
    assert tasks.ack("acme", [first[0].task_id, "no-such-task"]) == 1
    clock.advance(31.0)
    again = tasks.lease("acme", limit=10, visibility_s=30.0)
    assert [(t.record.item_id, t.deliveries) for t in again] == [("m-2", 2)]  # its lease ended unacked
    assert tasks.ack("acme", [again[0].task_id]) == 1 and tasks.pending("acme") == 0


def check_an_appeal_task_is_written_at_once_with_its_own_id_and_time_and_bounded(make: MakeQueue) -> None:
    clock = FakeClock(1000.0)
    tasks = make(clock, max_pending=2, retention_s=100.0)
    record = record_for("acme", item="m-1", at=950.0)
    tasks.offer(record, "review")
    tasks.flush()
    tasks.put(record, "appeal", "appeal:x1", 1000.0)   # written now, not at the next flush
    tasks.put(record, "appeal", "appeal:x1", 1000.0)   # the same id again: no change
    assert tasks.pending("acme") == 2
    with pytest.raises(LimitExceededError, match="holds 2 review tasks unacked, the limit"):
        tasks.put(record, "appeal", "appeal:x2", 1000.0)
    clock.advance(60.0)  # the decision is past the retention, the appeal is not: only the decision's task goes
    tasks.offer(record_for("globex"), "review")
    tasks.flush()
    assert [(t.task_id, t.reason, t.record) for t in tasks.lease("acme", limit=5, visibility_s=30.0)] == [
        ("appeal:x1", "appeal", record)]


def check_a_tenant_never_leases_acks_or_counts_another_tenants_tasks(make: MakeQueue) -> None:
    clock = FakeClock(1000.0)
    tasks = make(clock)
    tasks.offer(record_for("acme", item="m-1"), "review")
    tasks.flush()
    acme_task = tasks.lease("acme", limit=1, visibility_s=1.0)[0]
    clock.advance(2.0)
    assert tasks.lease("globex", limit=10, visibility_s=30.0) == [] and tasks.pending("globex") == 0
    assert tasks.ack("globex", [acme_task.task_id]) == 0 and tasks.leased("globex", [acme_task.task_id]) == set()
    assert tasks.pending("acme") == 1


def check_bounds_drop_and_count_instead_of_growing(make: MakeQueue) -> None:
    tasks = make(FakeClock(1000.0), max_pending=2, max_buffer=3)
    for i in range(4):
        tasks.offer(record_for("acme", item=f"m-{i}"), "review")
    assert tasks.dropped == 1  # the buffer holds 3
    assert tasks.flush() == 2 and tasks.dropped == 2 and tasks.pending("acme") == 2  # the tenant holds 2
    with pytest.raises(InvalidRequestError, match="limit"):
        tasks.lease("acme", limit=0, visibility_s=1.0)
    with pytest.raises(InvalidRequestError, match="visibility_timeout_s"):
        tasks.lease("acme", limit=1, visibility_s=0.0)


def check_tasks_and_leases_outlive_the_process(make: MakeQueue) -> None:
    clock = FakeClock(1000.0)
    first = make(clock)
    first.offer(record_for("acme", item="m-1"), "review")
    first.offer(record_for("acme", item="m-2"), "review")
    first.close()  # a graceful stop writes what is buffered
    second = make(clock)
    leased = second.lease("acme", limit=1, visibility_s=10.0)
    third = make(clock)  # another process (a restarted router, another replica) sees the lease
    assert [t.record.item_id for t in third.lease("acme", limit=5, visibility_s=10.0)] == ["m-2"]
    clock.advance(11.0)
    back = third.lease("acme", limit=5, visibility_s=10.0)  # both leases ended: both delivered again
    assert [(t.record.item_id, t.deliveries) for t in back] == [("m-1", 2), ("m-2", 2)] and back[0].task_id == leased[0].task_id


def check_tasks_never_outlive_the_audit_retention(make: MakeQueue) -> None:
    clock = FakeClock(1000.0)
    tasks = make(clock, retention_s=100)
    tasks.offer(record_for("acme", item="old", at=1000.0), "review")
    tasks.flush()
    clock.advance(150.0)
    tasks.offer(record_for("acme", item="new", at=1150.0), "review")
    tasks.flush()
    assert [t.record.item_id for t in tasks.lease("acme", limit=10, visibility_s=1.0)] == ["new"]
