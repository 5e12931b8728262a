"""Review tasks in Redis Streams (services/router/control/reviews_redis.py) on a real redis-server started
here: the queue keeps the review-task contract the SQLite queue keeps (tests/unit/router/control/
review_tasks_contract.py); two replicas leasing one tenant at once never hand out one task twice; the
tasks are plain stream entries read through the `reviewers` consumer group."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
import redis

from services.common.errors import UnavailableError
from services.router.control.review_queue import ReviewTasks
from services.router.control.reviews_redis import GROUP, RedisReviewQueue
from tests.servers import RedisServer, redis_server
from tests.stubs import FakeClock
from tests.unit.router.control.review_tasks_contract import (check_a_task_is_leased_then_delivered_again_unless_acked,
                                                             check_a_tenant_never_leases_acks_or_counts_another_tenants_tasks,
                                                             check_an_appeal_task_is_written_at_once_with_its_own_id_and_time_and_bounded,
                                                             check_bounds_drop_and_count_instead_of_growing,
                                                             check_tasks_and_leases_outlive_the_process,
                                                             check_tasks_never_outlive_the_audit_retention)
from tests.unit.router.control.test_audit import record_for


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    with redis_server(tmp_path_factory.mktemp("redis")) as running:
        yield running


@pytest.fixture
def make(server: RedisServer) -> Iterator[Callable[..., ReviewTasks]]:
    """Opens a queue on the test's own Redis database (flushed first): each call another process's client."""
    redis.Redis.from_url(server.url).flushdb()
    opened: list[RedisReviewQueue] = []

    def open_queue(clock: FakeClock, **settings: Any) -> ReviewTasks:
        queue = RedisReviewQueue(redis.Redis.from_url(server.url), prefix="t", clock=clock, **settings)
        opened.append(queue)
        return queue
    yield open_queue
    for queue in opened:
        queue._redis.close()


@pytest.mark.parametrize("check", [check_a_task_is_leased_then_delivered_again_unless_acked,
                                   check_an_appeal_task_is_written_at_once_with_its_own_id_and_time_and_bounded,
                                   check_a_tenant_never_leases_acks_or_counts_another_tenants_tasks,
                                   check_bounds_drop_and_count_instead_of_growing,
                                   check_tasks_and_leases_outlive_the_process,
                                   check_tasks_never_outlive_the_audit_retention])
def test_the_redis_queue_keeps_the_contract(make: Callable[..., ReviewTasks], check: Callable[..., None]) -> None:
    check(make)


def test_two_replicas_leasing_one_tenant_at_once_never_share_a_task(make: Callable[..., ReviewTasks],
                                                                    server: RedisServer) -> None:
    clock = FakeClock(1000.0)
    writer = make(clock)
    for i in range(400):
        writer.offer(record_for("acme", item=f"m-{i}"), "review")
    assert writer.flush() == 400
    replicas = [make(clock) for _ in range(4)]
    got: list[list[str]] = [[] for _ in replicas]
    start = threading.Barrier(len(replicas))

    def drain(index: int) -> None:
        start.wait()
        while batch := replicas[index].lease("acme", limit=7, visibility_s=60.0):
            got[index].extend(task.task_id for task in batch)
    threads = [threading.Thread(target=drain, args=(i,)) for i in range(len(replicas))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    every = [task for tasks in got for task in tasks]
    assert len(every) == len(set(every)) == 400 and sum(1 for tasks in got if tasks) >= 2
    # plain Redis Streams underneath: one stream per tenant, read through the consumer group
    plain = redis.Redis.from_url(server.url)
    stream = "t:review:{acme}:stream"
    assert plain.xlen(stream) == 400 and plain.xinfo_groups(stream)[0]["name"].decode() == GROUP
    assert plain.xpending(stream, GROUP)["pending"] == 400
    assert writer.ack("acme", every) == 400 and plain.xlen(stream) == 0 and plain.xpending(stream, GROUP)["pending"] == 0


def test_tasks_wait_out_a_redis_that_is_down_and_calls_answer_unavailable(make: Callable[..., ReviewTasks],
                                                                         server: RedisServer,
                                                                         caplog: pytest.LogCaptureFixture) -> None:
    queue = make(FakeClock(1000.0))
    server.stop()
    try:
        queue.offer(record_for("acme", item="m-1"), "review")
        with pytest.raises(UnavailableError, match="kept buffered"):
            queue.flush()
        assert queue.dropped == 0 and queue.buffered == 1  # kept for the next flush
        for call in (lambda: queue.lease("acme", limit=1, visibility_s=1.0), lambda: queue.ack("acme", ["x"]),
                     lambda: queue.pending("acme")):
            with pytest.raises(UnavailableError, match="Redis is unavailable"):
                call()
        stopping = make(FakeClock(1000.0))
        stopping.offer(record_for("acme", item="m-lost"), "review")
        stopping.close()  # a router stopping while Redis is down logs what it could not write, and stops
        assert "review tasks: 1 could not be written to Redis before shutdown" in caplog.text
    finally:
        server.start()
    queue.offer(record_for("acme", item="m-2"), "review")
    assert queue.flush() == 2 and queue.pending("acme") == 2
    assert [t.record.item_id for t in queue.lease("acme", limit=5, visibility_s=1.0)] == ["m-1", "m-2"]


def test_a_task_redis_refuses_is_dropped_and_the_others_are_written(make: Callable[..., ReviewTasks],
                                                                    server: RedisServer) -> None:
    queue = make(FakeClock(1000.0))
    redis.Redis.from_url(server.url).set("t:review:{broken}:ids", "not a hash")  # a key of the wrong type
    queue.offer(record_for("broken", item="m-1"), "review")
    queue.offer(record_for("acme", item="m-2"), "review")
    assert queue.flush() == 1 and queue.dropped == 1 and queue.buffered == 0  # never stuck re-sending it
    assert queue.pending("acme") == 1


def test_a_delivered_task_in_no_lease_is_taken_back_once_idle_past_any_lease(make: Callable[..., ReviewTasks],
                                                                              server: RedisServer) -> None:
    queue = make(FakeClock(1000.0), orphan_after_s=0.2)
    queue.offer(record_for("acme", item="m-1"), "review")
    queue.flush()
    # a lease script cut short after XREADGROUP (Redis out of memory): delivered to the group, in no lease
    plain = redis.Redis.from_url(server.url)
    assert plain.xreadgroup(GROUP, "router", {"t:review:{acme}:stream": ">"}, count=1)
    assert queue.lease("acme", limit=5, visibility_s=60.0) == []  # not idle long enough yet: maybe a live lease
    time.sleep(0.3)
    back = queue.lease("acme", limit=5, visibility_s=60.0)
    assert [t.record.item_id for t in back] == ["m-1"]
    assert queue.lease("acme", limit=5, visibility_s=60.0) == []  # leased now: not handed out twice
