"""The entry point every modality service shares: parse flags, load config, load models, serve.

`services/<modality>/server.py` only says which models it serves; this module does the rest.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path
from typing import Callable, Sequence

from tritonclient.grpc import service_pb2_grpc

from services.common.config import ConfigError
from services.common.grpc_server import GrpcService
from services.common.kserve_servicer import KServeServicer, build_runners, warm_up
from services.common.logs import configure_logging
from services.common.model_api import ServedModel
from services.common.model_repository import ModelNotFoundError
from services.common.service_config import ModalityServiceConfig, load_service_config

log = logging.getLogger(__name__)
KSERVE_SERVICE = "inference.GRPCInferenceService"
VERSION = "0.1.0"

ModelFactory = Callable[[ModalityServiceConfig], Sequence[ServedModel]]


def parse_args(service: str, argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog=f"python -m services.{service}.server",
        description=f"auditmesh {service} service: KServe v2 (Triton) gRPC inference over ONNX Runtime, with "
                    "grpc.health.v1 and server reflection. SIGTERM drains in-flight work and exits.")
    parser.add_argument("--config", type=Path, default=Path(f"config/{service}.yaml"),
                        help=f"service config YAML (default: config/{service}.yaml); env AUDITMESH_LISTEN and "
                             "AUDITMESH_MODEL_REPOSITORY override its listen address and model repository")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    parser.add_argument("--log-format", default="text", choices=["text", "json"])
    return parser.parse_args(argv)


def build_service(config: ModalityServiceConfig, models: Sequence[ServedModel]) -> tuple[GrpcService, KServeServicer]:
    """Wire models into a KServe servicer inside a GrpcService (not started)."""
    runners = build_runners(models, config.batching)
    servicer = KServeServicer(f"auditmesh-{config.service}", VERSION, runners)

    def register(server: object) -> None:
        service_pb2_grpc.add_GRPCInferenceServiceServicer_to_server(servicer, server)
        for runner in runners.values():
            runner.batcher.start()

    def on_serving_change(serving: bool) -> None:
        servicer.ready = serving

    closers = [runner.close for runner in runners.values()]
    service = GrpcService(config.service, config.server, service_names=[KSERVE_SERVICE], register=register,
                          on_serving_change=on_serving_change, on_close=closers)
    return service, servicer


async def _serve(config: ModalityServiceConfig, factory: ModelFactory) -> None:
    models = list(factory(config))
    seconds = warm_up(models)
    log.info("loaded and warmed %s in %.2fs (intra_op_threads=%d)", ", ".join(m.name for m in models), seconds,
             config.onnxruntime.intra_op_threads)
    service, _ = build_service(config, models)
    await service.start()
    await service.serve_until_signal()


def run_modality(service: str, factory: ModelFactory, argv: Sequence[str] | None = None) -> int:
    """Run a modality service until SIGTERM. Returns the process exit code."""
    args = parse_args(service, argv)
    configure_logging(service, args.log_level, args.log_format)
    try:
        config = load_service_config(args.config)
        asyncio.run(_serve(config, factory))
    except (ConfigError, ModelNotFoundError) as error:
        print(f"{service}: {error}", file=sys.stderr)
        return 2
    return 0


__all__ = ["run_modality", "build_service"]
