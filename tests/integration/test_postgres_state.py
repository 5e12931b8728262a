"""Issue 41: the policy store and the decision audit log in a real PostgreSQL (a throwaway cluster
started here), shared by several router replicas.

- The store keeps services/router/control/store.py's contract (immutable versions, compare-and-set
  pointers with their log, canaries, generation) and serialises racing writers across connections.
- Migrations run once, also when replicas start together; a database newer than the code is refused.
- The audit log batches inserts, pages by tenant, keeps compressed records readable, deletes by
  retention in batches, and never raises or loses a record while PostgreSQL is down: it retries.
- Reviewers' labels and review tasks are shared too: a label stored through one replica is exported by
  another, the per-tenant bound holds across them, and tasks offered by several replicas are leased once
  (`FOR UPDATE SKIP LOCKED`) and wait out an outage in the buffer.
- Two router lifecycles on one database: an activation on one is served by the other within the
  measured bound (LISTEN/NOTIFY), and a replica whose notification connection was cut still
  converges through its generation poll.
"""

from __future__ import annotations

import asyncio
import re
import statistics
import threading
import time
from dataclasses import replace
from pathlib import Path

import psycopg
import pytest

from services.common.errors import AlreadyExistsError, ConflictError, FailedPreconditionError, LimitExceededError
from services.launcher import ROOT, free_base_port
from services.router.config import load_router_config
from services.router.control.audit import AuditRecord
from services.router.control.audit_postgres import PostgresAuditLog
from services.router.control.appeals import new_appeal, resolve
from services.router.control.label_store import Label
from services.router.control.labels_postgres import PostgresLabelStore
from services.router.control.reviews_postgres import PostgresReviewQueue
from services.router.control.canary import RollbackBounds
from services.router.control.postgres import MIGRATIONS, PostgresUnavailableError, apply_migrations
from services.router.control.store import CanarySpec, StoredVersion
from services.router.control.store_postgres import PostgresPolicyStore
from services.router.policy_lifecycle import PolicyLifecycle
from tests.servers import PostgresServer, postgres_server
from tests.stubs import FakeClock


def version(v: str, digest: str = "h1") -> StoredVersion:
    return StoredVersion("policy", "default", v, f"name: default\nversion: '{v}'\n", digest, "ops", "why", 1.0)


def test_versions_are_immutable_and_puts_are_idempotent(dsn: str) -> None:
    store = PostgresPolicyStore(dsn)
    assert store.put_version(version("1")) == version("1")
    assert store.put_version(version("1")) == version("1")
    with pytest.raises(AlreadyExistsError, match=r"policy/default: version: '1' already exists with different content"):
        store.put_version(version("1", digest="h2"))
    store.put_version(version("2", digest="h2"))
    assert [v.version for v in store.list_versions("policy", "default")] == ["1", "2"]
    assert store.get_version("policy", "default", "3") is None
    store.close()


def test_pointers_compare_and_set_and_log_every_change(dsn: str) -> None:
    store = PostgresPolicyStore(dsn, clock=FakeClock())
    start = store.generation()
    store.set_pointer("policy", "default", "", "1", expected="", author="ops", reason="first")
    store.set_pointer("policy", "default", "", "2", expected="1", author="ops", reason="raise")
    with pytest.raises(ConflictError, match="points at '2', not '1'"):
        store.set_pointer("policy", "default", "", "3", expected="1", author="other", reason="stale")
    store.set_pointer("policy", "default", "acme", "1", expected="", author="ops", reason="pin acme")
    store.set_pointer("policy", "default", "acme", "", expected="1", author="ops", reason="unpin")
    assert [(p.scope, p.version) for p in store.pointers()] == [("", "2")]
    assert [(c.version, c.previous) for c in store.history("policy", "default", "")] == [("1", ""), ("2", "1")]
    assert store.generation() == start + 4
    store.close()


def test_state_is_shared_by_every_connection(dsn: str) -> None:
    store = PostgresPolicyStore(dsn)
    store.put_version(version("1"))
    store.set_pointer("policy", "default", "", "1", expected="", author="ops", reason="r")
    spec = CanarySpec("default", "", "1", "2", 10.0, True, RollbackBounds(min_samples=5), "ops", 5.0)
    store.put_canary(spec)
    store.set_file_hash("config/policies/default.yaml", "abc")
    other = PostgresPolicyStore(dsn)  # another replica
    assert other.get_version("policy", "default", "1") == version("1")
    assert [p.version for p in other.pointers()] == ["1"]
    assert other.canaries() == [spec]
    assert other.file_hash("config/policies/default.yaml") == "abc" and other.file_hash("x") == ""
    assert other.generation() == store.generation() == 2
    store.close()
    other.close()


def test_racing_canary_stops_land_once(dsn: str) -> None:
    stores = [PostgresPolicyStore(dsn) for _ in range(4)]
    spec = CanarySpec("default", "", "1", "2", 10.0, False, RollbackBounds(), "ops", 5.0)
    stores[0].put_canary(spec)
    stopped = replace(spec, running=False, stopped_reason="auto-rollback")
    barrier = threading.Barrier(len(stores))
    landed: list[bool] = []

    def stop(index: int) -> None:
        barrier.wait()
        landed.append(stores[index].stop_canary(stopped))

    threads = [threading.Thread(target=stop, args=(i,)) for i in range(len(stores))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(landed) == [False, False, False, True]
    assert stores[0].canaries() == [stopped]
    for store in stores:
        store.close()


def test_racing_activations_land_once(dsn: str) -> None:
    stores = [PostgresPolicyStore(dsn) for _ in range(4)]
    stores[0].set_pointer("policy", "default", "", "1", expected="", author="ops", reason="r")
    barrier = threading.Barrier(len(stores))
    outcomes: list[str] = []

    def activate(index: int) -> None:
        barrier.wait()
        try:
            stores[index].set_pointer("policy", "default", "", f"v{index}", expected="1", author=f"r{index}", reason="race")
            outcomes.append("won")
        except ConflictError:
            outcomes.append("conflict")

    threads = [threading.Thread(target=activate, args=(i,)) for i in range(len(stores))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["conflict"] * 3 + ["won"]
    assert len(stores[0].history("policy", "default", "")) == 2
    for store in stores:
        store.close()


def test_migrations_run_once_and_a_newer_schema_is_refused(dsn: str) -> None:
    stores = []
    threads = [threading.Thread(target=lambda: stores.append(PostgresPolicyStore(dsn))) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(stores) == 3
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT count(*) FROM auditmesh_schema_migrations").fetchone() == (len(MIGRATIONS),)
        assert apply_migrations(conn) == 0
        conn.execute("INSERT INTO auditmesh_schema_migrations (version) VALUES (%s)", (len(MIGRATIONS) + 1,))
        conn.commit()
    with pytest.raises(RuntimeError, match="newer than this router's"):
        PostgresPolicyStore(dsn)
    for store in stores:
        store.close()


def record(tenant: str, index: int, at: float) -> AuditRecord:
    return AuditRecord(audit_id=f"{tenant}-{index}", request_id=f"r{index}", item_id=f"i{index}", tenant=tenant,
                       time=at, decision="allow", categories=(), policy_name="default", policy_version="1",
                       models=(("text", "1"),), evidence=(), metadata={"room": "7"}, content=("hello",))


@pytest.mark.parametrize("compression", ["none", "zlib"])
def test_audit_log_pages_one_tenant_at_a_time(dsn: str, compression: str) -> None:
    log = PostgresAuditLog(dsn, compression=compression)  # type: ignore[arg-type]
    now = time.time() - 100  # queries see records older than QUERY_HORIZON_S
    for i in range(25):
        log.append(record("acme", i, now + i))
        log.append(record("globex", i, now + i))
    assert log.pending == 50 and log.flush() == 50 and log.pending == 0
    page, token = log.query("acme", limit=10)
    seen = [r.audit_id for r in page]
    while token:
        page, token = log.query("acme", limit=10, page_token=token)
        seen += [r.audit_id for r in page]
    assert seen == [f"acme-{i}" for i in range(25)]
    window, _ = log.query("globex", since=now + 5, until=now + 8)
    assert [r.audit_id for r in window] == ["globex-5", "globex-6", "globex-7"]
    assert window[0] == record("globex", 5, now + 5)
    # one record by id, only for its own tenant (a statement of reasons reads it)
    assert log.get("globex", "globex-5") == record("globex", 5, now + 5)
    assert log.get("acme", "globex-5") is None and log.get("globex", "nope") is None
    log.close()


def test_a_record_postgresql_refuses_never_blocks_the_others(dsn: str, postgres: PostgresServer) -> None:
    log = PostgresAuditLog(dsn)
    now = time.time() - 100
    log.append(record("acme", 0, now))
    log.append(replace(record("acme", 1, now + 1), item_id="a\x00b", metadata={"k": "\x00"}))  # a tenant's NUL
    log.append(record("acme", 2, now + 2))
    assert log.flush() == 3 and log.rejected == 0  # JSON text holds an escaped NUL
    assert [r.item_id for r in log.query("acme")[0]] == ["i0", "a\x00b", "i2"]
    # A record the table refuses (here: a NUL in the tenant column, which text cannot hold) is dropped alone.
    log.append(record("acme", 3, now + 3))
    log.append(replace(record("acme", 4, now + 4), tenant="ac\x00me"))
    log.append(record("acme", 5, now + 5))
    assert log.flush() == 2 and log.rejected == 1 and log.dropped == 1 and log.pending == 0
    assert [r.item_id for r in log.query("acme")[0]][-2:] == ["i3", "i5"]
    log.close()


def test_audit_retention_deletes_old_records(dsn: str) -> None:
    clock = FakeClock(1_000_000.0)
    log = PostgresAuditLog(dsn, retention_s=100.0, clock=clock)
    for i in range(30):
        log.append(record("acme", i, clock() - 300 + i * 10))  # the first 20 are older than 100 s
    log.flush()
    assert [r.audit_id for r in log.query("acme", limit=100)[0]] == [f"acme-{i}" for i in range(20, 30)]
    log.close()


def test_audit_log_keeps_and_retries_while_postgres_is_down() -> None:
    with postgres_server() as pg:
        log = PostgresAuditLog(pg.dsn, max_pending=50)
        now = time.time() - 100
        log.append(record("acme", 0, now))
        assert log.flush() == 1
        pg.stop()
        for i in range(1, 61):
            log.append(record("acme", i, now + i))
        assert log.flush() == 0  # no exception: moderation never sees the database fail
        assert log.write_errors >= 1 and log.pending == 50 and log.dropped == 10
        pg.start()
        assert log.flush() == 50
        ids = [r.audit_id for r in log.query("acme", limit=100)[0]]
        assert ids == ["acme-0"] + [f"acme-{i}" for i in range(11, 61)]
        log.close()


def lifecycle_on(dsn: str, tmp_path: Path, name: str, watch_interval_s: float) -> PolicyLifecycle:
    config = load_router_config(ROOT / "config" / "router.yaml")
    (tmp_path / name).mkdir()
    settings = replace(config.lifecycle, postgres_dsn=dsn, watch_interval_s=watch_interval_s,
                       labels_path=str(tmp_path / name / "labels.sqlite"),
                       review_tasks_path=str(tmp_path / name / "reviews.sqlite"))
    return PolicyLifecycle.open(replace(config, lifecycle=settings, policies_dir=str(ROOT / "config" / "policies"),
                                        tenants_file=str(ROOT / "config" / "tenants.yaml")))


def store_version(lifecycle: PolicyLifecycle, number: int) -> str:
    text = (ROOT / "config" / "policies" / "default.yaml").read_text()
    new = f"pg-{number}"
    lifecycle.control.put("policy", re.sub(r'(?m)^version: .*$', f'version: "{new}"', text), author="test")
    return new


async def served_by(lifecycle: PolicyLifecycle, wanted: str, timeout_s: float) -> float:
    """Seconds until `lifecycle` serves `wanted` as the default policy (fails after `timeout_s`)."""
    started = time.monotonic()
    while lifecycle.runtime.snapshot.policies["default"].version != wanted:
        assert time.monotonic() - started < timeout_s, f"not served within {timeout_s} s"
        await asyncio.sleep(0.002)
    return time.monotonic() - started


async def test_every_replica_serves_an_activation_within_a_second(dsn: str, tmp_path: Path) -> None:
    # The poll is slowed to 30 s, so what converges the replicas here is the notification.
    first, second = (lifecycle_on(dsn, tmp_path, name, watch_interval_s=30.0) for name in ("a", "b"))
    first.register(None)
    second.register(None)
    try:
        await asyncio.sleep(0.3)  # the followers are listening
        delays = []
        for number in range(30):
            wanted = store_version(first, number)
            await asyncio.to_thread(first.control.activate, "policy", "default", wanted, author="test")
            delays.append(await served_by(second, wanted, timeout_s=5.0))
        p99 = statistics.quantiles(delays, n=100, method="inclusive")[98]
        print(f"convergence over {len(delays)} activations: P50 {statistics.median(delays) * 1000:.1f} ms, P99 {p99 * 1000:.1f} ms")
        assert p99 < 1.0, f"P99 convergence {p99:.3f} s"
    finally:
        await first.close()
        await second.close()


async def test_a_replica_that_missed_notifications_converges_by_polling(dsn: str, tmp_path: Path, postgres: PostgresServer) -> None:
    first = lifecycle_on(dsn, tmp_path, "a", watch_interval_s=30.0)
    second = lifecycle_on(dsn, tmp_path, "b", watch_interval_s=0.5)
    second.register(None)
    try:
        await asyncio.sleep(0.3)
        # Cut the second replica's LISTEN connection: it reconnects, but what was announced meanwhile is lost.
        with psycopg.connect(postgres.dsn, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'LISTEN%'")
        wanted = store_version(first, 100)
        await asyncio.to_thread(first.control.activate, "policy", "default", wanted, author="test")
        assert await served_by(second, wanted, timeout_s=3.0) < 0.5 + 1.0  # one poll interval, and a reload
    finally:
        await first.close()
        await second.close()


def test_an_unreachable_postgresql_is_named_without_its_password() -> None:
    dsn = f"postgresql://auditmesh:s3cret-pw@127.0.0.1:{free_base_port(1)}/auditmesh"
    with pytest.raises(PostgresUnavailableError) as failed:
        PostgresPolicyStore(dsn)
    assert "127.0.0.1" in str(failed.value) and "auditmesh@" in str(failed.value)
    assert "s3cret-pw" not in str(failed.value)
    config = load_router_config(ROOT / "config" / "router.yaml")
    assert "s3cret-pw" not in repr(replace(config, lifecycle=replace(config.lifecycle, postgres_dsn=dsn)))


def test_labels_are_shared_by_replicas_and_bounded_per_tenant(dsn: str) -> None:
    first, second = PostgresLabelStore(dsn, max_per_tenant=5), PostgresLabelStore(dsn, max_per_tenant=5)
    assert first.submit("acme", [Label(f"m-{i}", f"text {i}", {"spam": i % 2}, "rev") for i in range(3)]).added == 3
    replaced = second.submit("acme", [Label("m-1", "text 1 again", {"spam": 0}, "rev-2"), Label("m-9", "nine", {"spam": 1})])
    assert (replaced.added, replaced.replaced, replaced.tenant_total) == (1, 1, 4)
    with pytest.raises(LimitExceededError, match="limit of 5"):
        first.submit("acme", [Label("m-7", "x", {"spam": 1}), Label("m-8", "y", {"spam": 1})])
    assert second.count("acme") == 4 and second.count("globex") == 0  # the refused call stored nothing
    page, token = first.page("acme", limit=2)
    rest, end = first.page("acme", limit=10, page_token=token)
    assert [label.item_id for label in page + rest] == ["m-0", "m-1", "m-2", "m-9"] and end == ""
    assert page[1].text == "text 1 again" and page[1].reviewer == "rev-2"
    second.submit("globex", [Label("m-1", "other tenant", {"spam": 1}, "rev")])
    one = first.label_of("acme", "m-1")  # one item's label (an appeal's outcome merges into it), per tenant
    assert one is not None and (one.text, one.labels, one.reviewer) == ("text 1 again", {"spam": 0}, "rev-2")
    assert first.label_of("globex", "m-1").text == "other tenant" and first.label_of("acme", "nope") is None  # type: ignore[union-attr]
    # an appeal's label merges into the item's label in one transaction, whichever replica writes it
    assert second.merge("acme", Label("m-1", "text 1 again", {"hate": 1}, "rev-3", time.time()))
    assert first.label_of("acme", "m-1").labels == {"spam": 0, "hate": 1}  # type: ignore[union-attr]
    assert not first.merge("acme", Label("m-1", "text 1 again", {"hate": 0}, "rev-4", 1.0))  # older: the label stands
    assert second.delete("acme", ["m-1", "m-2", "m-1", "nope"]) == 2  # one replica erases, the other sees it
    assert [label.item_id for label in first.page("acme")[0]] == ["m-0", "m-9"] and first.count("globex") == 1
    first.close()
    second.close()


def test_review_tasks_from_every_replica_are_leased_once(dsn: str) -> None:
    replicas = [PostgresReviewQueue(dsn), PostgresReviewQueue(dsn)]
    now = time.time()
    for i in range(40):
        replicas[i % 2].offer(record("acme", i, now + i), "review")
    replicas[0].offer(record("globex", 99, now), "review")
    assert replicas[0].flush() + replicas[1].flush() == 41
    leased: list[list[str]] = [[], []]
    barrier = threading.Barrier(2)

    def consume(index: int) -> None:
        barrier.wait()
        for _ in range(5):
            leased[index] += [t.task_id for t in replicas[index].lease("acme", limit=4, visibility_s=60)]

    threads = [threading.Thread(target=consume, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    everything = leased[0] + leased[1]
    assert sorted(everything) == sorted(f"acme-{i}" for i in range(40))  # each task once, across both streams
    assert replicas[1].leased("acme", leased[0]) == set(leased[0])
    assert replicas[0].ack("acme", everything) == 40 and replicas[1].pending("acme") == 0
    assert replicas[1].ack("acme", ["globex-99"]) == 0 and replicas[0].pending("globex") == 1  # never another tenant's
    # an appeal's task is written at once, with its own id and time, beside the decision's own task
    replicas[0].put(record("globex", 99, now - 86400), "appeal", "appeal:x1", now)
    replicas[0].put(record("globex", 99, now - 86400), "appeal", "appeal:x1", now)  # the same id again: no change
    assert replicas[1].pending("globex") == 2
    assert {(t.task_id, t.reason) for t in replicas[1].lease("globex", limit=5, visibility_s=60)} == {
        ("globex-99", "review"), ("appeal:x1", "appeal")}
    for queue in replicas:
        queue.close()


def test_appeals_are_shared_by_replicas_and_resolved_once(dsn: str) -> None:
    first, second = PostgresLabelStore(dsn), PostgresLabelStore(dsn)
    decision = record("acme", 7, time.time())
    appeal = new_appeal("acme", decision, appellant="user-81", statement="a quote, not my words", now=1000.0)
    first.add_appeal(appeal)
    assert second.get_appeal("acme", appeal.appeal_id) == appeal and second.get_appeal("globex", appeal.appeal_id) is None
    assert second.appeals_of("acme", decision.audit_id) == [appeal] and second.appeals_of("globex", decision.audit_id) == []
    with pytest.raises(LimitExceededError, match="has 10 appeals, the most one decision may have"):
        for _ in range(10):
            second.add_appeal(new_appeal("acme", decision, appellant="user-81", statement="again", now=1001.0))
    assert len(first.appeals_of("acme", decision.audit_id)) == 10
    upheld = resolve(appeal, "upheld", reviewer="rev-7", note="", now=1100.0)
    second.save_resolution(upheld)
    with pytest.raises(FailedPreconditionError, match="already resolved \\(upheld by rev-7\\)"):
        first.save_resolution(resolve(appeal, "reversed", reviewer="rev-8", note="", now=1200.0))  # a stale read
    assert first.get_appeal("acme", appeal.appeal_id) == upheld
    assert second.delete("acme", [decision.item_id]) == 0 and first.appeals_of("acme", decision.audit_id) == []  # erasure
    first.close()
    second.close()


def test_review_tasks_wait_out_a_postgresql_outage() -> None:
    with postgres_server() as pg:
        queue = PostgresReviewQueue(pg.dsn)
        pg.stop()
        queue.offer(record("acme", 1, time.time()), "review")
        with pytest.raises(psycopg.Error):
            queue.flush()
        assert queue.buffered == 1 and queue.dropped == 0
        pg.start()
        written = 0
        for _ in range(3):  # as the writer does every 0.05 s: the first try may meet the dead connection
            try:
                written = queue.flush()
                break
            except psycopg.Error:
                continue
        assert written == 1
        assert [t.task_id for t in queue.lease("acme", limit=10, visibility_s=60)] == ["acme-1"]
        queue.close()


def test_a_removed_tenants_data_is_purged_from_every_shared_store(dsn: str) -> None:
    audit, reviews, labels = PostgresAuditLog(dsn), PostgresReviewQueue(dsn), PostgresLabelStore(dsn)
    now = time.time()
    for tenant in ("gone", "stays"):
        decision = record(tenant, 1, now)
        audit.append(decision)
        reviews.offer(decision, "review")  # buffered: written by the purge's flush, then deleted
        labels.submit(tenant, [Label("i1", "text", {"spam": 1}, "rev")])
        labels.add_appeal(new_appeal(tenant, decision, appellant="u", statement="", now=now))
    assert (labels.purge_tenant("gone"), reviews.purge_tenant("gone"), audit.purge_tenant("gone")) == ((1, 1), 1, 1)
    assert (labels.count("gone"), reviews.pending("gone"), audit.get("gone", "gone-1")) == (0, 0, None)
    assert (labels.count("stays"), reviews.pending("stays")) == (1, 1) and audit.get("stays", "stays-1") is not None
    assert labels.appeals_of("stays", "stays-1") and not labels.appeals_of("gone", "gone-1")
    for store in (audit, reviews, labels):
        store.close()
