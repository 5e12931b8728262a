"""Traces start at the router only. The real text service process (tracing on, spans written by the
console exporter) records nothing for a KServe call that carries no trace context, even under a sampler
that would sample every new trace, and records its spans under a sampled caller's `traceparent`; with
router and text as two processes at 50% ratio sampling, the text service traced exactly the requests the
router sampled."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import grpc
import numpy as np
import tritonclient.grpc.aio as triton_aio
from auditmesh.v1 import moderation_pb2 as pb
from auditmesh.v1 import moderation_pb2_grpc as pb_grpc

from services.launcher import Mesh, free_base_port
from services.router.tenants import hash_key

TRACE_ID = "0af7651916cd43dd8448eb211c80319c"


def spans_in(output: str) -> list[dict[str, object]]:
    """The console exporter's spans: pretty-printed JSON objects, one after another, among log lines."""
    decoder, spans, index = json.JSONDecoder(), [], 0
    while (start := output.find("{\n", index)) >= 0:
        span, index = decoder.raw_decode(output, start)
        if isinstance(span, dict) and "context" in span:
            spans.append(span)
    return spans


async def call_text(address: str, headers: dict[str, str]) -> None:
    client = triton_aio.InferenceServerClient(address)
    try:
        tensor = triton_aio.InferInput("TEXT", [1, 1], "BYTES")
        tensor.set_data_from_numpy(np.array([[b"see you on friday"]], dtype=object))
        await client.infer("text_moderation", [tensor], headers=headers)
    finally:
        await client.close()


def test_the_text_service_follows_its_caller_and_starts_no_trace(tmp_path: Path) -> None:
    log = tmp_path / "text.out"
    with log.open("wb") as output:
        mesh = Mesh(base_port=free_base_port(), output=output.fileno(),
                    extra_env={"OTEL_TRACES_EXPORTER": "console", "OTEL_TRACES_SAMPLER": "parentbased_always_on"})
        try:
            mesh.start_service("text")
            mesh.wait_serving("text")
            address = mesh.address("text")
            secret = dict(mesh.internal_metadata())  # the text port needs the mesh's shared secret
            asyncio.run(call_text(address, secret))  # no trace context: not traced here
            asyncio.run(call_text(address, {**secret, "traceparent": f"00-{TRACE_ID}-b7ad6b7169203331-01"}))
        finally:
            assert mesh.stop_service("text") == 0  # SIGTERM: drains and flushes the spans
    spans = spans_in(log.read_text(encoding="utf-8", errors="replace"))
    names = sorted(str(span["name"]) for span in spans)
    assert names == ["/inference.GRPCInferenceService/ModelInfer", "batch text_moderation"]
    assert {span["context"]["trace_id"] for span in spans} == {f"0x{TRACE_ID}"}  # type: ignore[index]


def test_router_sampled_requests_are_traced_on_both_services_and_the_rest_on_neither(tmp_path: Path) -> None:
    """Router and text service as two processes, both with ratio sampling at 50%: the text service's spans
    belong exactly to the traces the router sampled (the rest reach it without context, and it starts
    none of its own)."""
    key = "trace-follow-key"
    tenants = tmp_path / "tenants.yaml"
    tenants.write_text(f"tenants:\n  - id: t\n    api_key_sha256: {hash_key(key)}\n    policies: [default]\n",
                       encoding="utf-8")
    tracing = {"OTEL_TRACES_EXPORTER": "console", "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
               "OTEL_TRACES_SAMPLER_ARG": "0.5"}
    dead = f"127.0.0.1:{free_base_port(1)}"
    logs = {name: tmp_path / f"{name}.out" for name in ("text", "router")}
    with logs["text"].open("wb") as text_out, logs["router"].open("wb") as router_out:
        text = Mesh(base_port=free_base_port(), output=text_out.fileno(), extra_env=tracing)
        router = Mesh(base_port=free_base_port(), output=router_out.fileno(), extra_env={
            **tracing, "AUDITMESH_TENANTS_FILE": str(tenants), "AUDITMESH_VISION_URL": dead, "AUDITMESH_OCR_URL": dead,
            "AUDITMESH_POLICY_STORE": str(tmp_path / "store.sqlite"), "AUDITMESH_AUDIT_LOG": str(tmp_path / "audit.sqlite")})
        try:
            text.start_service("text")
            text.wait_serving("text")
            router.extra_env["AUDITMESH_TEXT_URL"] = text.address("text")  # the other mesh's text service
            router.start_service("router")
            router.wait_serving("router")
            with grpc.insecure_channel(router.address("router")) as channel:
                stub = pb_grpc.ModerationServiceStub(channel)
                for number in range(40):
                    request = pb.ModerateRequest(request_id=f"r{number}", item=pb.Item(id="i"))
                    request.item.parts.add(text="see you on friday")
                    stub.Moderate(request, metadata=[("x-api-key", key)], timeout=10)
        finally:
            assert router.stop_service("router") == 0 and text.stop_service("text") == 0  # flushes the spans
    router_spans = spans_in(logs["router"].read_text(encoding="utf-8", errors="replace"))
    text_spans = spans_in(logs["text"].read_text(encoding="utf-8", errors="replace"))
    requests = {span["context"]["trace_id"] for span in router_spans  # type: ignore[index]
                if span["name"] == "/auditmesh.v1.ModerationService/Moderate"}
    assert 0 < len(requests) < 40  # some sampled, some not
    assert {span["context"]["trace_id"] for span in router_spans} == requests  # type: ignore[index]
    # one request at a time, so one batch each: the text service traced exactly the sampled requests
    assert {span["context"]["trace_id"] for span in text_spans} == requests  # type: ignore[index]
