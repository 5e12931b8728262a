"""The router's composition root and CLI: builds the dispatchers, pipeline, policy lifecycle and the
servicer, and serves them. `python -m services.router` runs it.

Run: `python -m services.router --config config/router.yaml` (see `--help`).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Sequence

import grpc
from auditmesh.v1 import moderation_pb2_grpc as pb_grpc

from services import __version__
from services.common.auth_guard import AuthGuard, AuthMetrics
from services.common.auth_throttle import AuthThrottle
from services.common.config import ConfigError
from services.common.contracts import classifier as classifier_contract
from services.common.contracts import match as match_contract
from services.common.contracts import ocr as ocr_contract
from services.common.contracts import text as text_contract
from services.common.contracts import vision as vision_contract
from services.common.gc_tuning import tune_for_serving
from services.common.grpc_server import GrpcService
from services.common.allocator import fix_mmap_threshold
from services.common.listen_args import add_listen_arguments, apply_listen_arguments, host_port
from services.common.logs import configure_logging
from services.common.metrics import new_registry
from services.common.tracing.telemetry import setup_tracing, shutdown_tracing
from services.router.cached_pipeline import retain_on_tenant_change
from services.router.classifiers import TenantClassifiers
from services.router.config import (ENV_ADMIN_KEYS_FILE, ENV_AUDIT_LOG, ENV_POLICIES_DIR, ENV_POLICY_STORE,
                                    ENV_TENANTS_FILE, ENV_UPSTREAM_URL, MODALITIES, OPTIONAL_UPSTREAMS, RouterConfig, Upstream,
                                    load_router_config)
from services.router.demo_keys import check_demo_keys
from services.router.dispatch import ModalityDispatcher
from services.router.lanes import apply_nice, check_classes_covered, log_service_name
from services.router.metrics import PolicyVersionsCollector, RouterMetrics, SchedulerCollector, VerdictCacheCollector
from services.router.pipeline import Pipeline
from services.router.control.bank_admin import BANK_ADMIN_SERVICE_NAME
from services.router.policy_lifecycle import ADMIN_SERVICE_NAME, PolicyLifecycle
from services.router.server import SERVICE_NAME, TOLERANT_STREAMS, ModerationServicer
from services.router.shared_quota import SharedQuota
from services.router.control.postgres import PostgresUnavailableError
from services.router.quota_redis import RedisQuotaBackend
from services.router.upstream_client import UpstreamSecurity

log = logging.getLogger("services.router")


class Router:
    """The router's parts wired together: dispatchers, pipeline, servicer, gRPC servers (the public
    one, and the admin one on `config.admin_listen` when set). `start` / `service.serve_until_signal`."""

    #: Each modality's input tensor and the outputs the router reads, from its contract.
    CONTRACTS = {"text": (text_contract.INPUT.name, text_contract.ROUTER_OUTPUTS),
                 "vision": (vision_contract.INPUT.name, vision_contract.ROUTER_OUTPUTS),
                 "ocr": (ocr_contract.INPUT.name, ocr_contract.ROUTER_OUTPUTS),
                 "classifier": (classifier_contract.INPUT.name, classifier_contract.ROUTER_OUTPUTS),
                 "match": (match_contract.INPUT.name, match_contract.ROUTER_OUTPUTS)}

    def __init__(self, config: RouterConfig, lifecycle: PolicyLifecycle, *,
                 security: UpstreamSecurity = UpstreamSecurity()) -> None:
        self.config = config
        self.lifecycle = lifecycle
        state = lifecycle.runtime.snapshot
        self.registry = new_registry("router", __version__)
        self.metrics = RouterMetrics(self.registry)
        # One dispatcher per served model: "text" (text_moderation) and "text_semantic" share the text upstream.
        upstreams = {**{m: (m, u) for m, u in config.upstreams.items()},
                     "text_semantic": ("text", semantic_upstream(config.upstreams["text"]))}

        def dispatcher(name: str, modality: str, upstream: Upstream) -> ModalityDispatcher:
            return ModalityDispatcher(name, upstream, input_name=self.CONTRACTS[modality][0],
                                      output_names=self.CONTRACTS[modality][1],
                                      max_message_bytes=config.server.max_message_bytes,
                                      qos_classes=state.tenants.qos_classes,
                                      on_batch=self.metrics.record_batch, security=security)

        self.dispatchers = {name: dispatcher(name, modality, upstream) for name, (modality, upstream) in upstreams.items()}
        # Each tenant's own classifier (classifier.<tenant> on the text service), made when a policy first reads it.
        self.classifiers = TenantClassifiers(config.upstreams["text"],
                                             lambda name, upstream: dispatcher(name, "classifier", upstream))
        self.pipeline = Pipeline(self.dispatchers["text"], self.dispatchers["vision"], self.dispatchers["ocr"],
                                 text_semantic=self.dispatchers["text_semantic"], classifiers=self.classifiers,
                                 match=self.dispatchers.get("match"))
        self.registry.register(PolicyVersionsCollector(lambda: lifecycle.runtime.snapshot.policy_versions()))
        self.registry.register(SchedulerCollector({**{m: d.scheduler for m, d in self.dispatchers.items()},
                                                   "classifier": self.classifiers}))
        self.registry.register(lifecycle.collector())
        auth_metrics = AuthMetrics(self.registry)
        # Tenants' rate quotas across replicas, counted in Redis (None: this process's token buckets only).
        if config.redis.enabled:
            for tenant in state.tenants.tenants.values():
                for note in config.shared_quota.warnings(tenant.id, tenant.quota):
                    log.warning("shared quota: %s", note)
        self.shared_quota = (SharedQuota(config.shared_quota, RedisQuotaBackend.for_config(
            config.redis, timeout_s=config.shared_quota.timeout_ms / 1000.0), metrics=self.metrics)
            if config.redis.enabled else None)
        self.servicer = ModerationServicer(config, lifecycle, self.pipeline, self.metrics,
                                           guard=AuthGuard(AuthThrottle(config.auth_throttle), auth_metrics, surface="public"),
                                           shared_quota=self.shared_quota)
        lifecycle.admin.guard = AuthGuard(AuthThrottle(config.auth_throttle), auth_metrics, surface="admin")
        if lifecycle.banks is not None:
            lifecycle.banks.guard = lifecycle.admin.guard
        if self.servicer.verdicts.cache is not None:
            self.registry.register(VerdictCacheCollector(self.servicer.verdicts.cache))
        self._describe_task: asyncio.Task[None] | None = None
        # The public port serves (and its reflection lists) moderation only; PolicyAdmin has its own port.
        self.service = GrpcService("router", config.server, service_names=[SERVICE_NAME], register=self._register,
                                   on_close=[self._close], metrics_registry=self.registry,
                                   tolerant_streams=TOLERANT_STREAMS)
        # The admin port never ages its connections: review-task streams stay open as long as reviewers work.
        self.admin_service = (GrpcService("router-admin", replace(config.server, listen=config.admin_listen, metrics_listen="",
                                                                   max_concurrent_rpcs=0, max_pending_calls=0,
                                                                   max_connection_age_s=0.0),
                                          service_names=[ADMIN_SERVICE_NAME, *([BANK_ADMIN_SERVICE_NAME] if lifecycle.banks else [])],
                                          register=lifecycle.register_admin)
                              if config.admin_listen else None)

    async def start(self) -> int:
        """Start the public server, then the admin one; returns the public port."""
        if self.shared_quota is not None:
            await self.shared_quota.warm()
        port = await self.service.start()
        if self.admin_service is not None:
            await self.admin_service.start()
        return port

    def _register(self, server: grpc.aio.Server) -> None:
        pb_grpc.add_ModerationServiceServicer_to_server(self.servicer, server)
        self.lifecycle.register(server)
        # A tenant removed on reload takes its cached verdicts with it (not only at their TTL).
        self.lifecycle.runtime.on_swap(retain_on_tenant_change(self.servicer.verdicts, asyncio.get_running_loop()))
        for dispatcher in self.dispatchers.values():
            dispatcher.start()
        self._describe_task = asyncio.get_running_loop().create_task(self._describe_upstreams())

    async def _describe_upstreams(self) -> None:
        """Learn the model versions behind each upstream (retrying while a service is still starting)."""
        while len(self.pipeline.models) < len(self.dispatchers):
            for modality, dispatcher in self.dispatchers.items():
                if modality not in self.pipeline.models:
                    versions = await dispatcher.describe_models()
                    if versions:
                        self.pipeline.models[modality] = versions
                        self.metrics.describe_upstream(modality, versions)
            await asyncio.sleep(1.0)

    async def _close(self) -> None:
        if self.admin_service is not None:
            await self.admin_service.stop()
        if self._describe_task is not None:
            self._describe_task.cancel()
        for dispatcher in self.dispatchers.values():
            await dispatcher.close()
        await self.classifiers.close()
        self.servicer.frames.close()  # decodes still running stop at their next step
        if self.shared_quota is not None:
            await self.shared_quota.close()
        await self.lifecycle.close()


def semantic_upstream(text: Upstream) -> Upstream:
    """The text upstream as the semantic model's dispatcher sees it (same service, its own model)."""
    return replace(text, model=text.semantic_model or text_contract.SEMANTIC_MODEL_NAME)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m services.router",
        description="auditmesh router: auditmesh.v1.ModerationService (Moderate, ModerateBatch, ModerateStream). "
                    "Authenticates tenants by API key, fans items out to the text, vision and OCR services "
                    "(KServe v2 gRPC), and fuses the scores through the tenant's policy. SIGTERM drains and exits.")
    parser.add_argument("--config", type=Path, default=Path("config/router.yaml"),
                        help="router config YAML (default: config/router.yaml). The flags below override it, and so "
                             "do (below the flags) env AUDITMESH_LISTEN, AUDITMESH_METRICS_LISTEN ('off' for none), "
                             "AUDITMESH_{TEXT,VISION,OCR}_URL, AUDITMESH_TENANTS_FILE, AUDITMESH_POLICIES_DIR, "
                             "AUDITMESH_POLICY_STORE, AUDITMESH_AUDIT_LOG, AUDITMESH_ADMIN_KEYS_FILE, AUDITMESH_ADMIN_LISTEN, "
                             "AUDITMESH_TLS_{CERT,KEY,CLIENT_CA}_FILE, AUDITMESH_UPSTREAM_TLS_{CA,CERT,KEY}_FILE, "
                             "AUDITMESH_INTERNAL_SECRET[_FILE] (never a flag: a command line is visible to every "
                             "user), AUDITMESH_ALLOW_DEMO_KEYS. Tracing: "
                             "OTEL_TRACES_EXPORTER (otlp, console; default none), OTEL_TRACES_SAMPLER[_ARG], "
                             "OTEL_EXPORTER_OTLP_ENDPOINT")
    parser.add_argument("--lane", default=None,
                        help="with `lanes:` in the config, the lane this process serves (its port and QoS classes; "
                             "default: env AUDITMESH_LANE, else the first lane). Run one process per lane. "
                             "--listen / --metrics-listen override the lane's addresses.")
    add_listen_arguments(parser)
    for modality in MODALITIES:
        parser.add_argument(f"--{modality}-url", type=host_port, default=None, metavar="HOST:PORT",
                            help=f"the {modality} service (default: env {ENV_UPSTREAM_URL[modality]}, else "
                                 f"upstreams.{modality}.url)")
    for optional in OPTIONAL_UPSTREAMS:
        parser.add_argument(f"--{optional}-url", type=host_port, default=None, metavar="HOST:PORT",
                            help=f"the {optional} service, when the config names upstreams.{optional} (default: env "
                                 f"{ENV_UPSTREAM_URL[optional]}, else upstreams.{optional}.url)")
    for flag, what, variable, key in (
            ("--tenants-file", "tenants file", ENV_TENANTS_FILE, "tenants_file"),
            ("--policies-dir", "policies folder", ENV_POLICIES_DIR, "policies_dir"),
            ("--policy-store", "policy store (SQLite)", ENV_POLICY_STORE, "lifecycle.store_path"),
            ("--audit-log", "decision audit log (SQLite)", ENV_AUDIT_LOG, "lifecycle.audit_path"),
            ("--admin-keys-file", "admin keys file", ENV_ADMIN_KEYS_FILE, "lifecycle.admin_keys_file")):
        parser.add_argument(flag, default=None, metavar="PATH", help=f"the {what} (default: env {variable}, else {key})")
    parser.add_argument("--admin-listen", default=None, metavar="HOST:PORT",
                        help="where the PolicyAdmin API listens, 'off' for nowhere (default: env AUDITMESH_ADMIN_LISTEN, "
                             "else admin_listen); never the public port")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    parser.add_argument("--log-format", default="text", choices=["text", "json"])
    return parser.parse_args(argv)


def arguments_applied(config: RouterConfig, args: argparse.Namespace) -> RouterConfig:
    """`config` (file and environment) with the command-line flags that were given applied over it."""
    upstreams = {m: replace(u, url=getattr(args, f"{m}_url")) if getattr(args, f"{m}_url", None) else u
                 for m, u in config.upstreams.items()}
    lifecycle = config.lifecycle
    lifecycle = replace(lifecycle, store_path=args.policy_store or lifecycle.store_path,
                        audit_path=args.audit_log or lifecycle.audit_path,
                        admin_keys_file=args.admin_keys_file or lifecycle.admin_keys_file)
    admin_listen = config.admin_listen if args.admin_listen is None else ("" if args.admin_listen == "off" else args.admin_listen)
    return replace(config, server=apply_listen_arguments(config.server, args), upstreams=upstreams,
                   tenants_file=args.tenants_file or config.tenants_file,
                   policies_dir=args.policies_dir or config.policies_dir, lifecycle=lifecycle, admin_listen=admin_listen)


async def _serve(config: RouterConfig, lifecycle: PolicyLifecycle, security: UpstreamSecurity) -> None:
    router = Router(config, lifecycle, security=security)
    await router.start()
    # The process's own entry point only (not `Router` itself, which tests run inside pytest).
    settings = tune_for_serving()
    log.info("gc: %d start-up objects frozen, thresholds %s", settings.frozen_objects, settings.thresholds)
    await router.service.serve_until_signal()


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    configure_logging("router", args.log_level, args.log_format)
    fix_mmap_threshold()  # request buffers go back to the system when freed (services/common/allocator.py)
    try:
        config = arguments_applied(load_router_config(args.config, args.lane), args)
        if config.lane is not None:  # lanes are processes of their own: their log lines say which
            configure_logging(log_service_name(config.lane), args.log_level, args.log_format)
        lifecycle = PolicyLifecycle.open(config)  # fails before binding the port on a bad tenants or policy file
        try:
            check_classes_covered(config.lanes, [c.name for c in lifecycle.runtime.snapshot.tenants.qos_classes])
        except ValueError as error:
            raise ConfigError(str(args.config), "lanes", str(error)) from None
        if config.lane is not None:
            others = [lane.name for lane in config.lanes if lane is not config.lane]
            log.info("lane %s: serving QoS classes %s on %s; other lanes (their own processes): %s", config.lane.name,
                     ", ".join(config.lane.classes), config.server.listen, ", ".join(others) or "none")
        snapshot = lifecycle.runtime.snapshot
        check_demo_keys([config.server.listen, config.admin_listen],
                        [*(t.api_key_sha256 for t in snapshot.tenants.tenants.values()),
                         *(k.key_sha256 for k in lifecycle.auth.keys)],
                        allow=config.allow_demo_keys, source=str(args.config))
        security = UpstreamSecurity.load(config.internal.secret_file, config.internal.tls, os.environ, str(args.config))
        if security.secret is None:
            log.warning("no internal secret (internal.secret_file / AUDITMESH_INTERNAL_SECRET[_FILE]): the modality "
                        "services will refuse the router's calls unless they run with auth.required: false")
        apply_nice(config.lane)
        setup_tracing("router")  # before any channel exists: the upstream channels must be instrumented
    except (ConfigError, ValueError) as error:  # ValueError: an OTEL_* variable with a bad value
        print(f"router: {error}", file=sys.stderr)
        return 2
    except PostgresUnavailableError as error:  # lifecycle.postgres_dsn: the server is down or refuses us
        print(f"router: {error}", file=sys.stderr)
        return 1
    try:
        asyncio.run(_serve(config, lifecycle, security))
    finally:
        shutdown_tracing()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
