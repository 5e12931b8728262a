"""Read and replace the weights of an ONNX graph (no PyTorch): the one place a tuned encoder is written.

`minilm_torch.write_onnx` (training) and `artifacts.install_artifacts` (`make models`, from the committed
float16 deltas) both go through `write_with_weights`, so the two write the same bytes for the same
weights.

Example::

    graph = onnx.load("model_repository/minilm_l6/1/model.onnx")
    weights = graph_weights(graph)
    write_with_weights(graph, {name: w * 1.0 for name, w in weights.items()}, Path("out/model.onnx"))
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Mapping

import numpy as np

__all__ = ["DATA_FILE", "graph_weights", "write_with_weights"]

#: The external-data file name the served encoders use (`minilm_l6`'s graph names it so).
DATA_FILE = "model.onnx_data"


def graph_weights(graph: Any) -> dict[str, np.ndarray]:
    """Every initializer of a loaded `onnx.ModelProto` (external data loaded) as a numpy array."""
    from onnx import numpy_helper

    return {tensor.name: numpy_helper.to_array(tensor) for tensor in graph.graph.initializer}


def write_with_weights(graph: Any, weights: Mapping[str, np.ndarray], path: Path, *, data_file: str = DATA_FILE) -> None:
    """Save a copy of `graph` with the initializers named in `weights` replaced, to `path` + `data_file`.

    Every name in `weights` must be an initializer of the graph; the others keep their values.
    """
    import onnx
    from onnx import numpy_helper

    out = copy.deepcopy(graph)
    names = {t.name for t in out.graph.initializer}
    missing = set(weights) - names
    if missing:
        raise ValueError(f"weights with no initializer in the graph: {sorted(missing)[:3]}")
    for index, tensor in enumerate(out.graph.initializer):
        if tensor.name in weights:
            array = np.asarray(weights[tensor.name], dtype=np.float32)
            out.graph.initializer[index].CopyFrom(numpy_helper.from_array(array, tensor.name))
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save_model(out, str(path), save_as_external_data=True, all_tensors_to_one_file=True, location=data_file,
                    size_threshold=1024)
