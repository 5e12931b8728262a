"""The Triton host's glue (no Triton here): tensors declared from the model's own specs, a Triton batch
of several requests run as one model call and split back per request, BYTES handed over as bytes."""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from services.common.contracts.tensors import TensorSpec
from services.common.serving.model_api import ModelFile
from services.common.serving.pytriton_host import infer_function, triton_dtype


class Upper:
    """A served model with two outputs; counts its calls."""

    name, version, platform, max_batch_size = "upper", "1", "test", 8
    inputs: Sequence[TensorSpec] = (TensorSpec("TEXT", "BYTES", (1,)),)
    outputs: Sequence[TensorSpec] = (TensorSpec("UPPER", "BYTES", (1,)), TensorSpec("LENGTH", "FP32", (1,)))

    def __init__(self) -> None:
        self.calls: list[int] = []

    def infer(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        texts = inputs["TEXT"]
        assert texts.dtype == np.object_ and all(isinstance(t, bytes) for t in texts[:, 0])
        self.calls.append(len(texts))
        return {"UPPER": np.array([[t.upper()] for t in texts[:, 0]], dtype=np.object_),
                "LENGTH": np.array([[len(t)] for t in texts[:, 0]], dtype=np.float32)}

    def warmup(self) -> None:
        pass

    def model_files(self) -> Sequence[ModelFile]:
        return ()


def test_a_triton_batch_is_one_model_call_split_back_per_request() -> None:
    model = Upper()
    infer = infer_function(model)
    requests = [{"TEXT": np.array([[b"ab"], [b"c"]], dtype=np.bytes_)}, {"TEXT": np.array([[b"xyz"]], dtype=np.bytes_)}]
    answers = infer(requests)
    assert model.calls == [3]
    assert [list(a["UPPER"][:, 0]) for a in answers] == [[b"AB", b"C"], [b"XYZ"]]
    assert [list(a["LENGTH"][:, 0]) for a in answers] == [[2.0, 1.0], [3.0]]


def test_tensor_dtypes_follow_the_specs() -> None:
    assert triton_dtype(TensorSpec("T", "BYTES", (1,))) is np.bytes_
    assert triton_dtype(TensorSpec("S", "FP32", (1,))) is np.float32
