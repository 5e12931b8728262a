"""The entry point every modality service shares: parse flags, load config, load models, serve.

`services/<modality>/server.py` only says which models it serves; this module does the rest, including
telemetry: tracing from the OTEL_* environment (`services.common.tracing.telemetry`) and Prometheus metrics on
`server.metrics_listen` (`services.common.metrics`).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from dataclasses import replace
from pathlib import Path
from typing import Callable, Mapping, Sequence

from tritonclient.grpc import service_pb2_grpc

from services import __version__
from services.common.gc_tuning import tune_for_serving
from services.common.auth_guard import AuthGuard, AuthMetrics
from services.common.auth_interceptor import InternalAuthInterceptor
from services.common.auth_throttle import AuthThrottle
from services.common.grpc_server import GrpcService
from services.common.allocator import fix_mmap_threshold
from services.common.errors import NotFoundError
from services.common.internal_auth import InternalCredentials
from services.common.listen_args import add_listen_arguments, apply_listen_arguments
from services.common.serving.kserve_servicer import KServeServicer, ModelRunner, build_runners, measure_warm, warm_up
from services.common.logs import configure_logging
from services.common.metrics import new_registry
from services.common.serving.model_metrics import ModelMetrics
from services.common.serving.model_api import ServedModel
from services.common.serving.model_lifecycle import ModelLifecycle
from services.common.serving.model_repository import ModelNotFoundError
from services.common.serving.modality_config import ModalityServiceConfig, load_credentials, load_service_config
from services.common.tracing.telemetry import setup_tracing, shutdown_tracing

log = logging.getLogger(__name__)
KSERVE_SERVICE = "inference.GRPCInferenceService"
VERSION = __version__

ModelFactory = Callable[[ModalityServiceConfig], Sequence[ServedModel]]
#: Loads one model by name on request (RepositoryModelLoad), given the models serving now (whose parts it
#: may share): a model of its own kind (e.g. `classifier.<tenant>`), or None for a name it does not
#: handle. NotFoundError when the name is of its kind but nothing can be built for it.
ModelLoader = Callable[[ModalityServiceConfig, str, Mapping[str, ServedModel]], "ServedModel | None"]


def parse_args(service: str, argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog=f"python -m services.{service}.server",
        description=f"auditmesh {service} service: KServe v2 (Triton) gRPC inference over ONNX Runtime, with "
                    "grpc.health.v1 and server reflection. SIGTERM drains in-flight work and exits.")
    parser.add_argument("--config", type=Path, default=Path(f"config/{service}.yaml"),
                        help=f"service config YAML (default: config/{service}.yaml). The flags below override it, "
                             "and so do (below the flags) env AUDITMESH_LISTEN, AUDITMESH_METRICS_LISTEN and "
                             "AUDITMESH_MODEL_REPOSITORY. AUDITMESH_TLS_{CERT,KEY,CLIENT_CA}_FILE turn on TLS / mTLS; "
                             "AUDITMESH_INTERNAL_SECRET[_FILE] is the secret every KServe call needs (required), "
                             "AUDITMESH_INTERNAL_ADMIN_SECRET[_FILE] the one model load/unload needs. Tracing: OTEL_TRACES_EXPORTER "
                             "(otlp, console; default none), OTEL_TRACES_SAMPLER[_ARG], OTEL_EXPORTER_OTLP_ENDPOINT; traces start at the "
                             "router: this service records spans only for calls whose caller sent a sampled traceparent")
    add_listen_arguments(parser)
    parser.add_argument("--model-repository", default=None, metavar="DIR",
                        help="model repository folder (default: env AUDITMESH_MODEL_REPOSITORY, else the config's)")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    parser.add_argument("--log-format", default="text", choices=["text", "json"])
    return parser.parse_args(argv)


def arguments_applied(config: ModalityServiceConfig, args: argparse.Namespace) -> ModalityServiceConfig:
    """`config` with the command-line flags given (`--listen`, `--metrics-listen`, `--model-repository`)
    applied over the file and the environment."""
    config = replace(config, server=apply_listen_arguments(config.server, args))
    return replace(config, model_repository=args.model_repository) if args.model_repository else config


def build_service(config: ModalityServiceConfig, models: Sequence[ServedModel], *,
                  factory: ModelFactory | None = None, loader: ModelLoader | None = None,
                  credentials: InternalCredentials | None = None) -> tuple[GrpcService, KServeServicer]:
    """Wire models into a KServe servicer inside a GrpcService (not started), with its own metrics registry.
    With `factory`, RepositoryModelLoad reloads a model through it (services.common.serving.model_lifecycle);
    with `loader` too, it also loads the models `loader` builds, including ones the service did not start with.
    With `credentials`, every call but health checks needs the internal secrets (internal_auth)."""
    registry = new_registry(config.service, VERSION)
    for model in models:  # a model's own metrics (the match model's banks, matches and floods)
        collector = getattr(model, "collector", None)
        if callable(collector):
            registry.register(collector())
    metrics = ModelMetrics(registry)
    runners = build_runners(models, config.batching, metrics)
    servicer = KServeServicer(f"auditmesh-{config.service}", VERSION, runners, metrics=metrics, limits=config.limits)
    if factory is not None:
        servicer.lifecycle = _model_lifecycle(config, factory, loader, servicer, metrics)
        servicer.lifecycle.trim_unstarted()  # more tenant classifiers on disk than the memory budget holds
        lifecycle = servicer.lifecycle
        metrics.watch_budget(lifecycle.held_bytes, lambda: lifecycle.evictions)
        runners = dict(servicer.runners)

    def register(server: object) -> None:
        service_pb2_grpc.add_GRPCInferenceServiceServicer_to_server(servicer, server)
        for runner in runners.values():
            runner.batcher.start()

    def on_serving_change(serving: bool) -> None:
        servicer.ready = serving

    # The lifecycle closes whichever runners serve at shutdown (a reload replaces them).
    closers = [servicer.lifecycle.close] if servicer.lifecycle is not None else [r.close for r in runners.values()]
    interceptors = []
    if credentials is not None:
        guard = AuthGuard(AuthThrottle(config.auth_throttle), AuthMetrics(registry), surface="kserve")
        interceptors.append(InternalAuthInterceptor(credentials, guard))
    service = GrpcService(config.service, config.server, service_names=[KSERVE_SERVICE], register=register,
                          on_serving_change=on_serving_change, on_close=closers, metrics_registry=registry,
                          interceptors=interceptors)
    return service, servicer


def _model_lifecycle(config: ModalityServiceConfig, factory: ModelFactory, loader: ModelLoader | None,
                     servicer: KServeServicer, metrics: ModelMetrics) -> ModelLifecycle[ModelRunner]:
    started_with = set(servicer.runners)

    def load(name: str) -> ServedModel:
        if loader is not None:
            one = loader(config, name, {n: runner.model for n, runner in servicer.runners.items()})
            if one is not None:
                return one
            if name not in started_with:  # never rebuild every model for a name nothing builds
                raise NotFoundError(f"model {name!r} is not served by the {config.service} service")
        for model in factory(config):  # each service serves one model, so this builds only what is asked
            if model.name == name:
                return model
        raise ModelNotFoundError(f"model {name!r} is not built by the {config.service} service")

    def start(model: ServedModel) -> ModelRunner:
        runner = ModelRunner(model, config.batching, metrics)
        runner.batcher.start()
        return runner

    return ModelLifecycle(servicer.runners, load=load, start=start, open_names=loader is not None,
                          budget_bytes=int(config.tenant_classifier_budget_mb * 1024 * 1024))


async def _serve(config: ModalityServiceConfig, factory: ModelFactory, loader: ModelLoader | None,
                 credentials: InternalCredentials) -> None:
    models = list(factory(config))
    seconds = warm_up(models)
    # Warm now: what a batch costs, reported to routers (ModelConfig `warmup`) to seed their batch cost.
    warm = {model.name: cost for model in models if (cost := measure_warm(model)) is not None}
    log.info("loaded and warmed %s in %.2fs (intra_op_threads=%d); warm: %s", ", ".join(m.name for m in models),
             seconds, config.onnxruntime.intra_op_threads,
             ", ".join(f"{name} {items} items in {s * 1000:.1f} ms" for name, (items, s) in warm.items()) or "-")
    if credentials.secret is None:
        log.warning("auth.required is false: this port accepts KServe calls without the internal secret")
    service, servicer = build_service(config, models, factory=factory, loader=loader, credentials=credentials)
    for name, cost in warm.items():
        if name in servicer.runners:  # not one set aside for the memory budget
            servicer.runners[name].warm_cost = cost
    await service.start()
    gc_settings = tune_for_serving()  # the process's entry point only (services/common/gc_tuning.py)
    log.info("gc: %d start-up objects frozen, thresholds %s", gc_settings.frozen_objects, gc_settings.thresholds)
    sys.setswitchinterval(config.batching.gil_switch_interval_ms / 1000.0)  # BatchingConfig.gil_switch_interval_ms
    log.info("gil switch interval %.2f ms", config.batching.gil_switch_interval_ms)
    # Only a model whose data can go stale (the match model's banks) needs its readiness watched.
    stale = any(callable(getattr(model, "serving_problem", None)) for model in models)
    watcher = asyncio.create_task(hold_while_problem(service, servicer)) if stale else None
    try:
        await service.serve_until_signal()
    finally:
        if watcher is not None:
            watcher.cancel()


async def hold_while_problem(service: GrpcService, servicer: KServeServicer, interval_s: float = 1.0) -> None:
    """Keep grpc.health NOT_SERVING while a served model says it should not take traffic (its data stale)."""
    while True:
        await service.hold(servicer.serving_problem())
        await asyncio.sleep(interval_s)


def run_modality(service: str, factory: ModelFactory, argv: Sequence[str] | None = None, *,
                 loader: ModelLoader | None = None) -> int:
    """Run a modality service until SIGTERM (`loader`: see `build_service`). Returns the process exit code."""
    args = parse_args(service, argv)
    configure_logging(service, args.log_level, args.log_format)
    fix_mmap_threshold()  # request buffers and decoded images go back to the system when freed
    try:
        config = arguments_applied(load_service_config(args.config), args)
        credentials = load_credentials(config, str(args.config))  # before loading models: fail fast
        setup_tracing(service, starts_traces=False)  # traces start at the router; a modality service follows
    except ValueError as error:  # ConfigError, or an OTEL_* variable with a bad value (named in the message)
        print(f"{service}: {error}", file=sys.stderr)
        return 2
    try:
        asyncio.run(_serve(config, factory, loader, credentials))
    except ModelNotFoundError as error:
        print(f"{service}: {error}", file=sys.stderr)
        return 2
    finally:
        shutdown_tracing()
    return 0


__all__ = ["run_modality", "build_service", "parse_args", "arguments_applied"]
