"""bench/unbatched_target.py: the unbatched baseline asks for and decodes text contract v3, as the
router does; a response the router could not use is a failure (MALFORMED); briefly run against the
real unbatched services."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.loadgen import Arrival
from bench.meshes import modality_clients, running_mesh, unbatched_mesh
from bench.payloads import BenchInputs
from bench.unbatched_target import MODELS, UnbatchedSender
from services.common.contracts import text as text_contract

DEADLINES = {"text": 5.0, "image": 30.0}


def test_text_calls_ask_for_the_v2_outputs_the_router_reads() -> None:
    model, input_name, outputs = MODELS["text"]
    assert (model, input_name) == (text_contract.MODEL_NAME, text_contract.INPUT.name)
    assert set(outputs) == set(text_contract.ROUTER_OUTPUTS) >= {*text_contract.SCORE_OUTPUTS, "MATCHES", "TARGET"}
    assert "TOXICITY" not in outputs


class _Result:
    def __init__(self, arrays: dict[str, Any]) -> None:
        self._arrays = arrays

    def as_numpy(self, name: str) -> Any:
        return self._arrays.get(name)


class _Client:
    """Answers every text call with the v2 outputs except `missing`."""

    def __init__(self, missing: str = "") -> None:
        self.missing = missing

    async def infer(self, model: str, inputs: Any, **_: Any) -> _Result:
        arrays: dict[str, Any] = {name: np.array([[0.25]], np.float32) for name in text_contract.SCORE_OUTPUTS}
        arrays |= {"MATCHES": np.array([[b"[]"]], object), "EVIDENCE": np.array([[b"[]"]], object),
                   "TARGET": np.array([[0.0]], np.float32)}
        arrays |= {name: np.array([[0.0]], np.float32) for name in text_contract.SUBCATEGORY_OUTPUTS}
        arrays.pop(self.missing, None)
        return _Result(arrays)


async def test_a_response_without_a_v2_output_is_malformed_not_ok() -> None:
    inputs = BenchInputs((b"hello",), (b"png",))
    ok = UnbatchedSender({"text": _Client()}, inputs, deadlines_s=DEADLINES)
    broken = UnbatchedSender({"text": _Client(missing="HARASSMENT")}, inputs, deadlines_s=DEADLINES)
    assert await ok(Arrival(0.0, "text", "any", 0)) == "OK"
    assert await broken(Arrival(0.0, "text", "any", 0)) == "MALFORMED"


def test_the_baseline_runs_against_the_real_unbatched_services(tmp_path: Path) -> None:
    inputs = BenchInputs.build(images=1)

    async def run(mesh: Any) -> None:
        async with modality_clients(mesh) as clients:
            sender = UnbatchedSender(clients, inputs, deadlines_s=DEADLINES)
            statuses = [await sender(Arrival(0.0, "text", "any", i)) for i in range(4)]
            statuses.append(await sender(Arrival(0.0, "image", "any", 0)))
            assert statuses == ["OK"] * 5
            row = await sender.infer("text", "you are a worthless idiot".encode(), time.monotonic() + 5.0)
            assert set(row.scores) == set(text_contract.CATEGORIES)
            assert max(row.scores.values()) > 0.5  # a real v2 model answered, not an empty row

    with running_mesh(unbatched_mesh(tmp_path), with_router=False) as mesh:
        asyncio.run(run(mesh))
