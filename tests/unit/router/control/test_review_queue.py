"""services/router/control/review_queue.py on a real SQLite file with a fake clock: which decisions become
tasks, at-least-once delivery (leases end, tasks come back), acks, tenant isolation, bounds, durability."""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path

import pytest

from services.router.control.review_queue import ReviewQueue, ReviewSampling, task_reason
from tests.stubs import FakeClock
from tests.unit.router.control.review_tasks_contract import (check_a_task_is_leased_then_delivered_again_unless_acked,
                                                             check_a_tenant_never_leases_acks_or_counts_another_tenants_tasks,
                                                             check_an_appeal_task_is_written_at_once_with_its_own_id_and_time_and_bounded,
                                                             check_bounds_drop_and_count_instead_of_growing,
                                                             check_tasks_and_leases_outlive_the_process,
                                                             check_tasks_never_outlive_the_audit_retention)
from tests.unit.router.control.test_audit import record_for


def queue(tmp_path: Path, clock: FakeClock, **kwargs: float) -> ReviewQueue:
    return ReviewQueue(tmp_path / "review_tasks.sqlite", clock=clock, **kwargs)  # type: ignore[arg-type]


def test_which_decisions_become_tasks() -> None:
    default = ReviewSampling()
    assert task_reason(default, "review", None, "m") == "review"
    assert task_reason(default, "allow", "block", "m") == "shadow_disagreement"
    assert task_reason(default, "block", "block", "m") is None and task_reason(default, "allow", None, "m") is None
    assert task_reason(ReviewSampling(review=False, shadow_disagreements=False), "review", "allow", "m") is None
    tenth = ReviewSampling(sample_allow=0.1, sample_block=1.0)
    sampled = [task_reason(tenth, "allow", None, f"m-{i}") for i in range(2000)]
    assert 150 <= sampled.count("sample_allow") <= 250  # a stable hash: about a tenth
    assert sampled == [task_reason(tenth, "allow", None, f"m-{i}") for i in range(2000)]  # the same items every time
    assert task_reason(tenth, "block", None, "m-1") == "sample_block"
    with pytest.raises(ValueError, match="sample_allow"):
        ReviewSampling(sample_allow=1.5)


def test_a_task_is_leased_then_delivered_again_unless_acked(tmp_path: Path) -> None:
    check_a_task_is_leased_then_delivered_again_unless_acked(lambda clock, **kwargs: queue(tmp_path, clock, **kwargs))


def test_an_appeal_task_is_written_at_once_with_its_own_id_and_time_and_bounded(tmp_path: Path) -> None:
    check_an_appeal_task_is_written_at_once_with_its_own_id_and_time_and_bounded(lambda clock, **kwargs: queue(tmp_path, clock, **kwargs))


def test_a_tenant_never_leases_acks_or_counts_another_tenants_tasks(tmp_path: Path) -> None:
    check_a_tenant_never_leases_acks_or_counts_another_tenants_tasks(lambda clock, **kwargs: queue(tmp_path, clock, **kwargs))


def test_bounds_drop_and_count_instead_of_growing(tmp_path: Path) -> None:
    check_bounds_drop_and_count_instead_of_growing(lambda clock, **kwargs: queue(tmp_path, clock, **kwargs))


def test_tasks_and_leases_outlive_the_process_and_the_file_is_private(tmp_path: Path) -> None:
    check_tasks_and_leases_outlive_the_process(lambda clock, **kwargs: queue(tmp_path, clock, **kwargs))
    assert stat.S_IMODE(os.stat(tmp_path / "review_tasks.sqlite").st_mode) == 0o600


def test_tasks_never_outlive_the_audit_retention(tmp_path: Path) -> None:
    check_tasks_never_outlive_the_audit_retention(lambda clock, **kwargs: queue(tmp_path, clock, **kwargs))


def test_a_write_that_fails_counts_its_tasks_as_dropped_and_leaves_the_queue_usable(tmp_path: Path) -> None:
    clock = FakeClock(1000.0)
    tasks = queue(tmp_path, clock)
    blocker = sqlite3.connect(str(tmp_path / "review_tasks.sqlite"), timeout=0.1)
    blocker.execute("BEGIN IMMEDIATE")  # another process holds the write lock past the busy timeout
    tasks._db.execute("PRAGMA busy_timeout = 100")
    tasks.offer(record_for("acme", item="m-1"), "review")
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        tasks.flush()
    assert tasks.dropped == 1 and not tasks._db.in_transaction
    blocker.rollback()
    blocker.close()
    tasks.offer(record_for("acme", item="m-2"), "review")
    assert tasks.flush() == 1 and tasks.pending("acme") == 1
