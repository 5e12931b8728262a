"""Creating ONNX Runtime sessions the same deliberate way in every service.

Thread pools: the four services share a 2-core machine by default, so each session gets a small
intra-op pool (default 1 thread, set per service in its config) and a single inter-op thread
(`execution_mode=ORT_SEQUENTIAL`): parallelism comes from batching, not from oversubscribing cores.
Spinning is disabled so an idle pool does not burn a core another service needs.
Graph optimisation: ORT_ENABLE_ALL (constant folding, node fusions, layout transforms); the optimised
graph is not written to disk (nothing is cached outside the repo or the venv).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import onnxruntime as ort

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SessionOptions:
    """How to run one ONNX model. `intra_op_threads` is the main knob (cores this model may use)."""

    intra_op_threads: int = 1
    inter_op_threads: int = 1
    providers: tuple[str, ...] = ("CPUExecutionProvider",)

    def __post_init__(self) -> None:
        if self.intra_op_threads < 1:
            raise ValueError(f"intra_op_threads must be >= 1, got {self.intra_op_threads}")
        if self.inter_op_threads < 1:
            raise ValueError(f"inter_op_threads must be >= 1, got {self.inter_op_threads}")


def create_session(path: str, options: SessionOptions = SessionOptions()) -> ort.InferenceSession:
    """Open `path` with the project's standard session settings.

    Example::

        session = create_session("model_repository/toxicity_en/1/model.onnx", SessionOptions(intra_op_threads=1))
    """
    so = ort.SessionOptions()
    so.intra_op_num_threads = options.intra_op_threads
    so.inter_op_num_threads = options.inter_op_threads
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    so.add_session_config_entry("session.inter_op.allow_spinning", "0")
    so.log_severity_level = 3
    available = set(ort.get_available_providers())
    providers = [p for p in options.providers if p in available] or ["CPUExecutionProvider"]
    missing = [p for p in options.providers if p not in available]
    if missing:
        log.warning("%s: execution providers %s are not in this onnxruntime build (it has %s); using %s",
                    path, missing, sorted(available), providers)
    return ort.InferenceSession(path, sess_options=so, providers=providers)
