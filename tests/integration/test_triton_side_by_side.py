"""A real NVIDIA Triton Inference Server (PyTriton 0.7.0, tritonserver 2.51, `.venv-triton`) hosting the
project's text model with Triton's dynamic batcher, behind the unchanged router (its text upstream URL
pointed at Triton): every answer has the same decision, category scores and evidence as the project's
own text service gives through the session mesh's router, for benign, spam, insulting, obfuscated and
Chinese texts, one at a time and in one concurrent batch."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Iterator

import grpc
import pytest
from auditmesh.v1 import moderation_pb2 as pb
from auditmesh.v1 import moderation_pb2_grpc as pb_grpc

from bench.payloads import TEXTS
from bench.side_router import side_router
from bench.triton_side import triton_server
from services.launcher import MODALITIES, Mesh
from tests.stubs import KEY_A, item

# Slow (starts a real Triton server and a second router): `make test` and `make test-slow` run it, `make test-fast` skips it.
pytestmark = pytest.mark.slow

POLICIES = ("default", "strict")
EXTRA = ("sh1t, f.u.c.k this", "ＦＲＥＥ money!!! click http://bit.ly/x now", "傻＊逼", "have a nice day")


@pytest.fixture(scope="module")
def triton_router(mesh: Mesh, tenants_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with triton_server("text", output=subprocess.DEVNULL) as triton:
        upstreams = {m: mesh.address(m) for m in MODALITIES} | {"text": triton.address}
        with side_router(tmp_path_factory.mktemp("triton-router"), upstreams, tenants_file, {},
                         with_metrics=False) as router:
            wait_until_answered_without_degradation(router.address("router"))
            yield router.address("router")


def wait_until_answered_without_degradation(address: str, timeout_s: float = 60.0) -> None:
    """Triton's first calls (cold sessions, the router's first connection to it) can miss an item's
    deadline and come back degraded; the comparison starts once the path answers normally. The warm-up
    sends the compared texts themselves, so every model they reach (text_semantic for the ones the
    balanced profile escalates, not only text_moderation) is warm."""
    deadline = time.monotonic() + timeout_s
    requests = [pb.ModerateBatchRequest(items=[item(text, item_id=f"w{i}") for i, text in enumerate(TEXTS + EXTRA)],
                                        policy=policy) for policy in POLICIES]
    with grpc.insecure_channel(address) as channel:
        stub = pb_grpc.ModerationServiceStub(channel)
        while time.monotonic() < deadline:
            try:
                results = [r for request in requests
                           for r in stub.ModerateBatch(request, metadata=[("x-api-key", KEY_A)], timeout=60).results]
                if not any(r.degraded or r.error.code for r in results):
                    return
            except grpc.RpcError:
                pass
            time.sleep(0.5)
    raise AssertionError(f"the router behind Triton gave no non-degraded answer within {timeout_s} s")


def answers(address: str, policy: str) -> list[pb.ModerateResponse]:
    with grpc.insecure_channel(address) as channel:
        stub = pb_grpc.ModerationServiceStub(channel)
        request = pb.ModerateBatchRequest(items=[item(text, item_id=f"t{i}") for i, text in enumerate(TEXTS + EXTRA)],
                                          policy=policy)
        batch = stub.ModerateBatch(request, metadata=[("x-api-key", KEY_A)], timeout=60)
        single = [stub.Moderate(pb.ModerateRequest(request_id="one", item=item(text), policy=policy),
                                metadata=[("x-api-key", KEY_A)], timeout=30) for text in TEXTS + EXTRA]
    return list(batch.results) + single


def judged(response: pb.ModerateResponse) -> tuple[object, ...]:
    """Everything an answer decides, less its scores (`scores` compares those within float noise)."""
    evidence = []
    for e in response.evidence:
        copy = type(e)()
        copy.CopyFrom(e)
        if copy.HasField("text_span"):
            copy.text_span.ClearField("score")
        evidence.append(copy.SerializeToString(deterministic=True))
    return (response.item_id, response.decision, response.degraded, response.error.code,
            [(c.category, c.action, c.rule) for c in response.categories], evidence)


def scores(response: pb.ModerateResponse) -> list[float]:
    """Category and evidence scores. Triton's Python backend runs the same models in its own environment:
    the multilingual encoder's BLAS and the n-gram heads' sums may round differently there (1e-4 seen)."""
    return [c.score for c in response.categories] + [e.text_span.score for e in response.evidence
                                                     if e.HasField("text_span")]


@pytest.mark.parametrize("policy", POLICIES)
def test_triton_behind_the_router_decides_as_the_text_service(triton_router: str, mesh: Mesh, policy: str) -> None:
    through_triton = answers(triton_router, policy)
    through_ours = answers(mesh.address("router"), policy)
    assert all(not r.degraded and not r.error.code for r in through_triton)
    assert [judged(r) for r in through_triton] == [judged(r) for r in through_ours]
    for triton, ours in zip(through_triton, through_ours):
        assert scores(triton) == pytest.approx(scores(ours), abs=1e-3), triton.item_id
    assert {r.decision for r in through_ours} >= {pb.ALLOW, pb.BLOCK}  # the texts exercise more than one decision
    # Triton names only the model it serves; our service also names the ONNX files behind it: proof that
    # these answers came through Triton.
    # (which text model answers depends on the policy's profile: text_moderation, text_semantic or both).
    triton_models = {m.name for m in through_triton[0].models}
    assert triton_models and triton_models <= {"text_moderation", "text_semantic"}
    assert len(through_triton[0].models) < len(through_ours[0].models)
