"""Traces start at the router only: a modality service process (the real text service, tracing on with a
sampler that would sample every new trace, spans written by the console exporter) records nothing for a
KServe call that carries no trace context, and records its server and batch spans under a caller's
sampled `traceparent`."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

import numpy as np
import tritonclient.grpc.aio as triton_aio

from services.launcher import Mesh, free_base_port

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
            asyncio.run(call_text(address, {}))  # no trace context: not traced here
            asyncio.run(call_text(address, {"traceparent": f"00-{TRACE_ID}-b7ad6b7169203331-01"}))
        finally:
            assert mesh.stop_service("text") == 0  # SIGTERM: drains and flushes the spans
    spans = spans_in(log.read_text(encoding="utf-8", errors="replace"))
    names = sorted(str(span["name"]) for span in spans)
    assert names == ["/inference.GRPCInferenceService/ModelInfer", "batch text_moderation"]
    assert {span["context"]["trace_id"] for span in spans} == {f"0x{TRACE_ID}"}  # type: ignore[index]
