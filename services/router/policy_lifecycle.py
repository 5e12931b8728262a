"""The policy lifecycle wired into the router: the store, the live snapshot, the config watcher, the
audit log, canary bookkeeping and the PolicyAdmin service. `server.py` calls four things:

    lifecycle = PolicyLifecycle.open(config)        # at start: import config files, first snapshot
    selection = lifecycle.select(tenant, policy, item_id)      # per item: one version, start to end
    with lifecycle.observing(selection, item_id): outcome = await pipeline.run(...)
    lifecycle.record(selection, request_id, item, outcome)     # audit record + canary counters

and calls `lifecycle.register(server)` (the background tasks, with the public server),
`lifecycle.register_admin(admin_server)` (the PolicyAdmin and BankAdmin services, on their own port) and
`await lifecycle.close()`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from pathlib import Path
from typing import Any, Coroutine, Iterable, Iterator, Mapping, Sequence

import grpc
from auditmesh.v1 import admin_pb2_grpc as apb_grpc
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from services.common.errors import InvalidRequestError, LimitExceededError, PermissionDeniedError, UnauthenticatedError
from services.router.control.admin import ADMIN_SERVICE_NAME, PolicyAdminServicer
from services.router.control.admin_auth import AdminAuth, load_admin_keys
from services.router.control.audit import AuditInput, audit_record
from services.router.control.audit_store import AuditLog, AuditStore
from services.router.control.bank_admin import BankAdminServicer
from services.router.control.canary import CANARY_CLOCK
from services.router.control.label_store import LabelRepository, LabelStore
from services.router.control.review_queue import ReviewQueue, ReviewTasks, task_reason
from services.router.config import RouterConfig
from services.router.control.watch import ConfigWatcher
from services.common.config import ConfigError
from services.match.banks import BankRepository
from services.match.bank_stores import open_bank_store
from services.router.control.postgres import describe_dsn
from services.router.pipeline import Outcome
from services.router.control.control import PolicyControl
from services.router.control.runtime import PolicyRuntime, Selection
from services.router.control.store import CanarySpec, PolicyStore, SQLitePolicyStore
from services.router.control.audit_postgres import PostgresAuditLog
from services.router.control.labels_postgres import PostgresLabelStore
from services.router.control.reviews_postgres import PostgresReviewQueue
from services.router.control.reviews_redis import RedisReviewQueue, persistence_warning
from services.router.control.store_postgres import PolicyChangeFeed, PostgresPolicyStore, follow_changes
from services.router.canary_fleet import CanaryFleet
from services.router.redis_state import connect, connect_blocking
from services.router.tenants import Tenant

log = logging.getLogger(__name__)
#: Seconds a review-task write or lease waits on Redis (off the request path: the queue's thread or an admin call).
REVIEW_REDIS_TIMEOUT_S = 5.0
#: How often canary counts are synced with the other replicas (with `redis.url`).
FLEET_SYNC_INTERVAL_S = 1.0
#: Failures that are the caller's doing; they do not count against a canary candidate.
CLIENT_ERRORS = (InvalidRequestError, PermissionDeniedError, UnauthenticatedError, LimitExceededError)

__all__ = ["ADMIN_SERVICE_NAME", "PolicyLifecycle"]


class PolicyLifecycle:
    """See the module docstring."""

    def __init__(self, config: RouterConfig, control: PolicyControl, audit: AuditLog, auth: AdminAuth, *,
                 labels: LabelRepository | None = None, reviews: ReviewTasks | None = None,
                 changes: PolicyChangeFeed | None = None, fleet: CanaryFleet | None = None,
                 banks: BankRepository | None = None) -> None:
        self.config = config
        self.control = control
        self.audit = audit
        self.auth = auth
        self.labels = labels
        self.reviews = reviews
        settings = config.lifecycle
        self.watcher = ConfigWatcher(control, Path(config.policies_dir), Path(config.tenants_file))
        self.admin = PolicyAdminServicer(control, audit, auth, labels=labels, reviews=reviews, banks=banks)
        #: Banks of known content (BankAdmin), in the store the match service reads; None: not served here.
        self.banks = BankAdminServicer(banks, auth) if banks is not None else None
        self._review_flush_s = settings.review_flush_interval_s
        self._watch_interval_s = settings.watch_interval_s
        self._flush_interval_s = settings.audit_flush_interval_s
        self._tasks: set[asyncio.Task[Any]] = set()
        #: Announced store changes (PostgreSQL's NOTIFY), followed by a thread of its own; None = polling only.
        self._changes = changes
        self._follower: threading.Thread | None = None
        self._stop_following = threading.Event()
        #: Canary counts shared with the other replicas (Redis); None = each replica judges its own traffic.
        self.fleet = fleet

    @classmethod
    def open(cls, config: RouterConfig) -> PolicyLifecycle:
        """Open the store, audit log, labels and review tasks (SQLite files, or with `lifecycle.postgres_dsn`
        PostgreSQL shared by every replica; review tasks in Redis Streams with `redis.url` and no PostgreSQL),
        import the config files (ConfigError on a bad one), load admin keys."""
        settings = config.lifecycle
        dsn = settings.postgres_dsn
        store: PolicyStore = PostgresPolicyStore(dsn) if dsn else SQLitePolicyStore(Path(settings.store_path))
        control = PolicyControl(store, default_bounds=settings.canary_bounds)
        snapshot = control.import_files(Path(config.policies_dir), Path(config.tenants_file))
        keys = settings.admin_keys + (load_admin_keys(Path(settings.admin_keys_file)) if settings.admin_keys_file else ())
        auth = AdminAuth(keys)
        auth.check_disjoint((t.api_key_sha256 for t in snapshot.tenants.tenants.values()), "lifecycle.admin_keys")
        if not len(auth):
            log.warning("no admin keys configured (lifecycle.admin_keys): the PolicyAdmin API refuses every call")
        retention_s = settings.audit_retention_days * 86400.0
        audit: AuditLog = (PostgresAuditLog(dsn, retention_s=retention_s, compression=settings.audit_compression) if dsn
                           else AuditStore(Path(settings.audit_path), retention_s=retention_s,
                                           compression=settings.audit_compression))
        labels: LabelRepository = PostgresLabelStore(dsn) if dsn else LabelStore(Path(settings.labels_file))
        reviews = open_review_tasks(config, retention_s)
        banks: BankRepository | None = None
        if config.admin_listen and (settings.banks_in_postgres or settings.banks_file):
            # the one choice of store the CLI and the match service make too (services/match/bank_stores.py)
            banks = open_bank_store(settings.banks_file or "", dsn if settings.banks_in_postgres else "")
            log.info("BankAdmin manages the bank store %s (the match services must read the same one: match.banks_dsn "
                     "or match.banks_path)", f"PostgreSQL {describe_dsn(dsn)}" if settings.banks_in_postgres
                     else settings.banks_file)
        return cls(config, control, audit, auth, labels=labels, reviews=reviews, banks=banks,
                   changes=PolicyChangeFeed(dsn) if dsn else None,
                   fleet=CanaryFleet(connect(config.redis, timeout_s=1.0), config.redis.key("canary"))
                   if config.redis.enabled else None)

    @property
    def runtime(self) -> PolicyRuntime:
        return self.control.runtime

    # -- request path ------------------------------------------------------------------------------

    def select(self, tenant: Tenant, requested_policy: str, item_key: str) -> Selection:
        """The versions one item is judged under, from one snapshot (PermissionDeniedError if not given)."""
        return self.runtime.snapshot.select(tenant, requested_policy, item_key)

    @contextlib.contextmanager
    def observing(self, selection: Selection, item_id: str) -> Iterator[None]:
        """Counts a failure of the wrapped work against the item's canary arm (client errors aside)."""
        try:
            yield
        except CLIENT_ERRORS:
            raise
        except Exception:
            self._observed(selection, item_id, None, {}, None)
            raise

    def record(self, selection: Selection, request_id: str, item_id: str, metadata: Mapping[str, str],
               texts: Sequence[str], outcome: Outcome) -> str:
        """Append the decision's audit record, offer it as a review task when the tenant's `review_tasks` say so,
        and count it for its canary; the record's id (the response carries it)."""
        verdict = outcome.verdict
        record = audit_record(AuditInput(selection.tenant.id, request_id, item_id, metadata, texts, selection.policy,
                                         verdict, outcome.models, selection.canary_arm, outcome.cached), now=time.time())
        self.audit.append(record)
        actions = {c.category: c.action for c in verdict.categories}
        shadow = outcome.shadow
        if self.reviews is not None:
            reason = task_reason(selection.tenant.review_tasks, verdict.decision,
                                 shadow.decision if shadow is not None else None, item_id or request_id)
            if reason is not None:
                self.reviews.offer(record, reason)
        self._observed(selection, item_id, verdict.decision, actions,
                       (shadow.decision, {c.category: c.action for c in shadow.categories}) if shadow is not None else None)
        return record.audit_id

    def _observed(self, selection: Selection, item_id: str, decision: str | None, actions: Mapping[str, str],
                  shadow: tuple[str, Mapping[str, str]] | None) -> None:
        reason = self.runtime.observe(selection, item_id, decision=decision, actions=actions, shadow=shadow)
        if reason is not None and selection.canary is not None:
            self._roll_back(selection.canary.spec, reason)

    def _roll_back(self, spec: CanarySpec, reason: str) -> None:
        """Stop the canary in the store (a worker thread), as the automatic rollback's author."""
        self._spawn(asyncio.to_thread(self.control.stop_canary, spec.policy, spec.scope, author="auto-rollback",
                                      reason=f"auto-rollback: {reason}", started_at=spec.started_at))

    # -- lifecycle ---------------------------------------------------------------------------------

    def register(self, server: grpc.aio.Server) -> None:
        """Start the watcher and the audit and review-task writers (with the server that serves moderation)."""
        self._spawn(self.watcher.run(self._watch_interval_s))
        if self._changes is not None and self._follower is None:
            self._follower = threading.Thread(target=follow_changes, name="policy-changes", daemon=True,
                                              args=(self._changes, self.control.reload, self._stop_following))
            self._follower.start()
        self._spawn(self._flush_audit())
        if self.fleet is not None:
            self._spawn(self._sync_canaries(self.fleet))
        if self.reviews is not None:
            self._spawn(self._flush_reviews(self.reviews))

    def register_admin(self, server: grpc.aio.Server) -> None:
        """Add the PolicyAdmin and BankAdmin services to `server` (the admin port's: never the public one)."""
        apb_grpc.add_PolicyAdminServicer_to_server(self.admin, server)
        if self.banks is not None:
            apb_grpc.add_BankAdminServicer_to_server(self.banks, server)

    def _spawn(self, work: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("policy lifecycle task failed", exc_info=task.exception())

    async def _flush_audit(self) -> None:
        while True:
            await asyncio.sleep(self._flush_interval_s)
            if self.audit.pending:
                try:
                    await asyncio.to_thread(self.audit.flush)
                except Exception:  # a disk error must not end the writer: records stay bounded and counted
                    log.exception("audit log: write failed")

    async def _sync_canaries(self, fleet: CanaryFleet) -> None:
        """Every FLEET_SYNC_INTERVAL_S: share each running canary's counts with the fleet and judge the
        fleet's (services/router/canary_fleet.py); roll back a canary whose bounds the fleet exceeds."""
        failing = False
        while True:
            await asyncio.sleep(FLEET_SYNC_INTERVAL_S)
            for canary in list(self.runtime.snapshot.canaries.values()):
                try:
                    await fleet.sync(canary.spec, canary.monitor)
                except Exception as error:  # Redis down: each replica judges its own counts until it is back
                    if not failing:
                        log.warning("canary counts: cannot sync with the other replicas (%s); judging this "
                                    "replica's own traffic until they can", error)
                    failing = True
                    continue
                if failing:
                    log.info("canary counts: synced with the other replicas again")
                    failing = False
                reason = self.runtime.judge(canary)
                if reason is not None:
                    self._roll_back(canary.spec, reason)

    async def _flush_reviews(self, reviews: ReviewTasks) -> None:
        while True:
            await asyncio.sleep(self._review_flush_s)
            if reviews.buffered:
                try:
                    await asyncio.to_thread(reviews.flush)
                except Exception:  # a disk error must not end the writer: the lost tasks are counted as dropped
                    log.exception("review tasks: write failed")

    async def close(self) -> None:
        """Stop the background tasks, write the pending audit records, close the files."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._follower is not None:
            self._stop_following.set()
            await asyncio.to_thread(self._follower.join, 5.0)
        if self.fleet is not None:
            await self.fleet.close()
        await asyncio.to_thread(self.audit.close)
        if self.labels is not None:
            self.labels.close()
        if self.reviews is not None:
            await asyncio.to_thread(self.reviews.close)
        if self.banks is not None and self.banks.store is not None:
            await asyncio.to_thread(self.banks.store.close)
        await asyncio.to_thread(self.control.store.close)  # may wait for a worker thread's statement to end

    def collector(self) -> Collector:
        """Prometheus: active versions, canary arms and shadow disagreements, audit backlog."""
        return LifecycleCollector(self)


class LifecycleCollector(Collector):
    """Read at scrape time from the live snapshot and canary monitors (see `PolicyLifecycle.collector`)."""

    def __init__(self, lifecycle: PolicyLifecycle) -> None:
        self.lifecycle = lifecycle

    def collect(self) -> Iterable[Metric]:
        snapshot = self.lifecycle.runtime.snapshot
        active = GaugeMetricFamily("auditmesh_policy_active", "1 for the policy version active in a scope",
                                   labels=["policy", "scope", "version"])
        for name, policy in snapshot.policies.items():
            active.add_metric([name, "", policy.version], 1)
        for (name, scope), policy in snapshot.overrides.items():
            active.add_metric([name, scope, policy.version], 1)
        yield active
        yield GaugeMetricFamily("auditmesh_policy_generation", "Policy store generation the router serves",
                                value=max(snapshot.generation, 0))
        items = GaugeMetricFamily("auditmesh_canary_window_items", "Items per canary arm in the monitoring window",
                                    labels=["policy", "scope", "arm", "outcome"])
        disagreements = CounterMetricFamily("auditmesh_canary_shadow_disagreements",
                                            "Shadow items where the candidate took another action", labels=["policy", "scope", "category"])
        now = CANARY_CLOCK()
        for (name, scope), canary in snapshot.canaries.items():
            report = canary.monitor.report(now)
            for arm, counts in (("baseline", report.baseline), ("candidate", report.candidate)):
                items.add_metric([name, scope, arm, "all"], counts.items)
                items.add_metric([name, scope, arm, "blocked"], counts.blocked)
                items.add_metric([name, scope, arm, "error"], counts.errors)
            for category, count in report.shadow.per_category.items():
                disagreements.add_metric([name, scope, category], count)
        yield items
        yield disagreements
        yield GaugeMetricFamily("auditmesh_audit_pending", "Audit records not yet written", value=self.lifecycle.audit.pending)
        yield CounterMetricFamily("auditmesh_audit_dropped", "Audit records dropped (buffer full)",
                                  value=self.lifecycle.audit.dropped)
        yield CounterMetricFamily("auditmesh_audit_write_errors", "Audit writes that failed (their records stay "
                                  "buffered and are retried)", value=self.lifecycle.audit.write_errors)
        reviews = self.lifecycle.reviews
        if reviews is not None:
            yield GaugeMetricFamily("auditmesh_review_tasks_buffered", "Review tasks not yet written", value=reviews.buffered)
            yield CounterMetricFamily("auditmesh_review_tasks_dropped", "Review tasks dropped (buffer full or a tenant "
                                      "at its bound of pending tasks)", value=reviews.dropped)


def open_review_tasks(config: RouterConfig, retention_s: float) -> ReviewTasks:
    """The review-task queue `lifecycle.review_tasks_backend` names ("" = PostgreSQL with a DSN, else the SQLite
    file); ConfigError naming the key when its server is not configured."""
    settings = config.lifecycle
    backend = settings.review_tasks_backend or ("postgres" if settings.postgres_dsn else "sqlite")
    if backend == "postgres":
        if not settings.postgres_dsn:
            raise ConfigError("router config", "lifecycle.review_tasks_backend",
                              "'postgres' needs lifecycle.postgres_dsn (env AUDITMESH_POSTGRES_DSN)")
        return PostgresReviewQueue(settings.postgres_dsn, retention_s=retention_s)
    if backend == "redis":
        if not config.redis.enabled:
            raise ConfigError("router config", "lifecycle.review_tasks_backend", "'redis' needs redis.url (env AUDITMESH_REDIS_URL)")
        client = connect_blocking(config.redis, timeout_s=REVIEW_REDIS_TIMEOUT_S)
        warning = persistence_warning(client)
        if warning:
            log.warning("review tasks: %s", warning)
        log.info("review tasks: Redis Streams under %s (shared by every replica on this Redis)", config.redis.key("review"))
        return RedisReviewQueue(client, prefix=config.redis.key_prefix, retention_s=retention_s)
    return ReviewQueue(Path(settings.review_tasks_file), retention_s=retention_s)
