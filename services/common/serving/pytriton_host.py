"""Serve a modality service's models from a real NVIDIA Triton Inference Server, with Triton's own
dynamic batcher, instead of our KServe v2 service: the router is pointed at it unchanged (its
`upstreams.<modality>.url`), since both speak the KServe v2 gRPC protocol.

NVIDIA PyTriton (`nvidia-pytriton` 0.7.0) bundles tritonserver 2.51 and runs on CPU; the model runs in
this process behind Triton's Python backend proxy. It needs numpy < 2, so it lives in its own venv
(`make triton-venv`: `.venv-triton`), and its backend stub must find the Python installation's own
libpython (`LD_LIBRARY_PATH`, else it loads Debian's libpython 3.11.2 and fails with
`RLock._recursion_count`). Stop it with SIGTERM (Triton then stops and cleans its workspace).

What is served is whatever the modality service serves: the models come from the service's own
`served_models(config)` (services/<modality>/server.py, config/<modality>.yaml) and each one's tensors
from its declared `inputs` / `outputs` (`services.common.serving.model_api.ServedModel`), so a new
contract or a second model is served here without a change. Batching: Triton's dynamic batcher with
`max_batch_size` from the model (capped by the service config's `batching.max_batch_size`),
`--max-queue-delay-us`, and three priority levels (the router's KServe `priority` 1-3, default 2).

Run::

    LD_LIBRARY_PATH=$(python3 -c 'import sysconfig; print(sysconfig.get_config_var("LIBDIR"))') \\
      .venv-triton/bin/python -m services.common.serving.pytriton_host --service text --grpc-port 8201
    python -m services.router --text-url 127.0.0.1:8201
"""

from __future__ import annotations

import argparse
import importlib
import logging
import signal
import sys
from pathlib import Path
from types import FrameType
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from services.common.config import ConfigError
from services.common.contracts.tensors import DATATYPES, TensorSpec
from services.common.serving.modality_config import ModalityServiceConfig, load_service_config
from services.common.serving.model_api import ServedModel

log = logging.getLogger("services.common.serving.pytriton_host")
#: KServe priority levels the router uses (realtime 1, standard 2, bulk 3); unset = standard.
PRIORITY_LEVELS, DEFAULT_PRIORITY = 3, 2


def triton_dtype(spec: TensorSpec) -> type:
    """The numpy dtype PyTriton declares a tensor with (BYTES: np.bytes_)."""
    return np.bytes_ if spec.datatype == "BYTES" else DATATYPES[spec.datatype]


def as_model_inputs(inputs: Mapping[str, np.ndarray], specs: Sequence[TensorSpec]) -> dict[str, np.ndarray]:
    """Triton's batched inputs as the model expects them: BYTES as an object array of `bytes`."""
    converted = {}
    for spec in specs:
        array = inputs[spec.name]
        converted[spec.name] = array.astype(np.object_) if spec.datatype == "BYTES" else array
    return converted


def infer_function(model: ServedModel) -> Callable[[Sequence[Mapping[str, np.ndarray]]], list[dict[str, np.ndarray]]]:
    """PyTriton's inference callable for `model`: one `model.infer` call per batch Triton forms; the
    requests of the batch are concatenated and the outputs split back per request."""
    names = [spec.name for spec in model.outputs]

    first = model.inputs[0].name

    def infer(requests: Sequence[Mapping[str, np.ndarray]]) -> list[dict[str, np.ndarray]]:
        sizes = [len(request[first]) for request in requests]
        merged = {spec.name: np.concatenate([request[spec.name] for request in requests]) for spec in model.inputs}
        outputs = model.infer(as_model_inputs(merged, model.inputs))
        split: list[dict[str, np.ndarray]] = []
        start = 0
        for size in sizes:
            split.append({name: outputs[name][start:start + size] for name in names})
            start += size
        return split

    return infer


def bind(triton: Any, model: ServedModel, max_batch_size: int, max_queue_delay_us: int) -> None:
    """Bind `model` to a running `pytriton.triton.Triton` under its own name and tensors."""
    from pytriton.model_config import DynamicBatcher, ModelConfig, Tensor

    def tensors(specs: Sequence[TensorSpec]) -> list[Any]:
        return [Tensor(name=spec.name, dtype=triton_dtype(spec), shape=spec.shape) for spec in specs]

    batcher = DynamicBatcher(max_queue_delay_microseconds=max_queue_delay_us, priority_levels=PRIORITY_LEVELS,
                             default_priority_level=DEFAULT_PRIORITY)
    version = int(model.version) if model.version.isdigit() else 1
    triton.bind(model_name=model.name, model_version=version, infer_func=infer_function(model),
                inputs=tensors(model.inputs), outputs=tensors(model.outputs),
                config=ModelConfig(max_batch_size=max_batch_size, batcher=batcher, batching=True))


def build_models(service: str, config: ModalityServiceConfig) -> Sequence[ServedModel]:
    """The models `services.<service>.server.served_models` serves for `config`."""
    module = importlib.import_module(f"services.{service}.server")
    factory: Callable[[ModalityServiceConfig], Sequence[ServedModel]] = module.served_models
    return factory(config)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m services.common.serving.pytriton_host",
                                     description="Serve a modality service's models from NVIDIA Triton (PyTriton).")
    parser.add_argument("--service", default="text", help="the modality service whose models to serve (default text)")
    parser.add_argument("--config", type=Path, default=None, help="its config (default config/<service>.yaml)")
    parser.add_argument("--model-repository", default=None, help="override the config's model_repository")
    parser.add_argument("--host", default="127.0.0.1", help="address Triton binds (default 127.0.0.1)")
    parser.add_argument("--grpc-port", type=int, required=True, help="KServe v2 gRPC port (the router's upstream)")
    parser.add_argument("--http-port", type=int, required=True, help="Triton's HTTP port (PyTriton uses it too)")
    parser.add_argument("--max-queue-delay-us", type=int, default=0,
                        help="dynamic batcher: longest wait for a fuller batch (default 0, like our batcher)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s triton %(levelname)s %(name)s: %(message)s")
    from pytriton.triton import Triton, TritonConfig

    path = args.config or Path("config") / f"{args.service}.yaml"
    try:
        config = load_service_config(path)
    except ConfigError as error:
        print(f"pytriton_host: {error}", file=sys.stderr)
        return 2
    if args.model_repository:
        from dataclasses import replace
        config = replace(config, model_repository=args.model_repository)
    models = build_models(args.service, config)
    for model in models:
        model.warmup()

    def stop(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt  # Triton.serve() stops the server and cleans its workspace on it

    signal.signal(signal.SIGTERM, stop)
    triton_config = TritonConfig(grpc_address=args.host, grpc_port=args.grpc_port, http_address=args.host,
                                 http_port=args.http_port, allow_metrics=False, exit_timeout_secs=5)
    with Triton(config=triton_config) as triton:
        for model in models:
            bind(triton, model, min(model.max_batch_size, config.batching.max_batch_size), args.max_queue_delay_us)
            log.info("serving %s (version %s) from Triton on %s:%d", model.name, model.version, args.host,
                     args.grpc_port)
        triton.serve()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
