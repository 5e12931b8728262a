"""The modality services speak KServe v2: tritonclient, used as an independent client, works unchanged;
each service also serves grpc.health.v1 and server reflection."""

from __future__ import annotations

import json
import threading
import time

import grpc
import numpy as np
import pytest
import tritonclient.grpc as triton
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from services.common.contracts import text as text_contract
from services.launcher import Mesh
from bench.render import render_text_image
from tests.stubs import MeshTritonClient


def test_text_service_metadata_and_infer(mesh: Mesh) -> None:
    client = MeshTritonClient(triton.InferenceServerClient(mesh.address("text")), mesh.internal_metadata())
    assert client.is_server_live() and client.is_server_ready() and client.is_model_ready("text_moderation")
    metadata = client.get_model_metadata("text_moderation", as_json=True)
    assert [i["name"] for i in metadata["inputs"]] == ["TEXT"]
    assert {o["name"] for o in metadata["outputs"]} == {spec.name for spec in text_contract.OUTPUTS}
    texts = ["have a great day", "you stupid idiot", "WINNER!! Claim your free prize now, call 09061701461", "傻逼"]
    tensor = triton.InferInput("TEXT", [len(texts), 1], "BYTES")
    tensor.set_data_from_numpy(np.array([[t.encode()] for t in texts], dtype=object))
    result = client.infer("text_moderation", [tensor])
    score = {category: result.as_numpy(name)[:, 0] for name, category in text_contract.SCORE_OUTPUTS.items()}
    matches = [json.loads(m[0]) for m in result.as_numpy(text_contract.MATCHES)]
    evidence = [json.loads(e[0]) for e in result.as_numpy(text_contract.EVIDENCE)]
    assert score["harassment"][1] > 0.5 > score["harassment"][0]
    assert score["spam"][2] > 0.5 > score["spam"][0]
    assert all(score[c][0] < 0.5 for c in text_contract.CATEGORIES)  # the benign text fires nothing
    assert any(e["category"] == "harassment" for e in evidence[1])
    assert result.as_numpy(text_contract.TARGET)[1, 0] == 1.0  # "you ...": addressed to a person
    assert matches[3] and matches[3][0]["term"] == "傻逼"
    stats = client.get_inference_statistics("text_moderation", as_json=True)
    assert int(stats["model_stats"][0]["inference_count"]) >= len(texts)
    client.close()


def test_a_realtime_text_does_not_wait_for_a_running_bulk_batch(mesh: Mesh) -> None:
    """config/text.yaml keeps one batch slot for realtime items (`urgent_concurrency: 1`): a bulk call of
    16 long texts through text_semantic (hundreds of ms of MiniLM) is running when a realtime text
    arrives; the realtime answer comes first. With the slot removed it comes after the bulk batch."""
    client = MeshTritonClient(triton.InferenceServerClient(mesh.address("text")), mesh.internal_metadata())
    long_text = " ".join(["the committee reviewed every clause of the proposal before the vote"] * 12)
    finished: list[str] = []
    done = threading.Event()

    def tensor(texts: list[str]) -> triton.InferInput:
        infer_input = triton.InferInput("TEXT", [len(texts), 1], "BYTES")
        infer_input.set_data_from_numpy(np.array([[t.encode()] for t in texts], dtype=object))
        return infer_input

    def on_answer(label: str):  # type: ignore[no-untyped-def]
        def callback(result: object, error: object) -> None:
            finished.append(label if error is None else f"{label}: {error}")
            if len(finished) == 2:
                done.set()
        return callback

    client.async_infer("text_semantic", [tensor([long_text] * 16)], on_answer("bulk"), priority=3)
    time.sleep(0.05)  # the bulk batch is running now
    client.async_infer("text_semantic", [tensor(["see you at the match tonight"])], on_answer("realtime"), priority=1)
    assert done.wait(60), finished
    assert finished == ["realtime", "bulk"], finished
    client.close()


def test_ocr_service_infer_and_bad_request_status(mesh: Mesh) -> None:
    client = MeshTritonClient(triton.InferenceServerClient(mesh.address("ocr")), mesh.internal_metadata())
    config = client.get_model_config("ocr", as_json=True)["config"]
    assert config["max_batch_size"] >= 1
    tensor = triton.InferInput("IMAGE", [2, 1], "BYTES")
    tensor.set_data_from_numpy(np.array([[render_text_image(["Hello world 2026"])], [b"not an image"]], dtype=object))
    result = client.infer("ocr", [tensor])
    lines = json.loads(result.as_numpy("LINES")[0][0])
    assert [line["text"] for line in lines] == ["Hello world 2026"]
    assert result.as_numpy("ERROR")[1][0]  # the bad image is reported, the good one still read
    wrong = triton.InferInput("PIXELS", [1, 1], "BYTES")
    wrong.set_data_from_numpy(np.array([[b"x"]], dtype=object))
    with pytest.raises(triton.InferenceServerException) as caught:
        client.infer("ocr", [wrong])
    assert "StatusCode.INVALID_ARGUMENT" in str(caught.value.status()) and "expects inputs ['IMAGE']" in caught.value.message()
    client.close()


@pytest.mark.parametrize("service, expected", [
    ("router", "auditmesh.v1.ModerationService"), ("text", "inference.GRPCInferenceService"),
    ("vision", "inference.GRPCInferenceService"), ("ocr", "inference.GRPCInferenceService")])
def test_health_and_reflection(mesh: Mesh, service: str, expected: str) -> None:
    with grpc.insecure_channel(mesh.address(service)) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        status = health.Check(health_pb2.HealthCheckRequest(service=expected), timeout=5).status
        assert status == health_pb2.HealthCheckResponse.SERVING
        reflection = reflection_pb2_grpc.ServerReflectionStub(channel)
        answers = reflection.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=5,
                                                  metadata=mesh.internal_metadata())  # modality ports: the mesh secret
        names = {s.name for answer in answers for s in answer.list_services_response.service}
        assert {expected, "grpc.health.v1.Health"} <= names
