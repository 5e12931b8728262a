"""Observability with real servers on loopback.

Tracing: the router and the text service run in this process (built as their mains build them) with an
in-memory span exporter, and talk over real gRPC, so one request's trace must cross the KServe v2 hop
through the W3C `traceparent` metadata the instrumented channel sends. A gated model proves that a
service-side batch span links to the ModelInfer span of every row in it.

Metrics: the session mesh's processes are scraped over HTTP and parsed with prometheus_client's parser.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import AsyncIterator

import grpc
import numpy as np
import pytest
import tritonclient.grpc.aio as triton_aio
from auditmesh.v1 import moderation_pb2 as pb
from auditmesh.v1 import moderation_pb2_grpc as pb_grpc
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind
from tritonclient.grpc import InferInput

from services.common.serving.batcher import BatchingConfig
from services.common.serving.modality_main import build_service
from services.common.service_config import ServerConfig
from services.common.serving.modality_config import ModalityServiceConfig
from services.common.tracing.telemetry import tracer, uninstrumented_channels
from services.launcher import ROOT, Mesh, free_base_port
from services.router.config import LifecycleConfig, RouterConfig, Upstream
from services.router.policy_lifecycle import PolicyLifecycle
from services.router.main import Router
from services.text.server import served_models
from tests.stubs import KEY_A, GatedModel, InMemoryTracing, sample, scrape

MODEL_INFER = "/inference.GRPCInferenceService/ModelInfer"
MODERATE = "/auditmesh.v1.ModerationService/Moderate"


def ids(span: ReadableSpan) -> tuple[int, int]:
    assert span.context is not None
    return span.context.trace_id, span.context.span_id


def parent_ids(span: ReadableSpan) -> tuple[int, int] | None:
    return (span.parent.trace_id, span.parent.span_id) if span.parent is not None else None


def text_request(text: str, request_id: str = "obs-1") -> pb.ModerateRequest:
    request = pb.ModerateRequest(request_id=request_id, item=pb.Item(id="it-1"))
    request.item.parts.add(text=text)
    return request


class InProcessMesh:
    """The router and the text service in this process; vision and OCR point at closed ports."""

    def __init__(self, tenants_file: Path, workdir: Path) -> None:
        text_config = ModalityServiceConfig("text", ServerConfig("127.0.0.1:0", grace_period_s=1.0),
                                            model_repository=str(ROOT / "model_repository"))
        self.text, _ = build_service(text_config, served_models(text_config))
        self.tenants_file = tenants_file
        self.workdir = workdir
        self.router: Router | None = None

    async def start(self) -> None:
        text_port = await self.text.start()
        dead = f"127.0.0.1:{free_base_port(1)}"
        config = RouterConfig(upstreams={"text": Upstream(f"127.0.0.1:{text_port}", "text_moderation"),
                                         "vision": Upstream(dead, "image_safety"), "ocr": Upstream(dead, "ocr")},
                              server=ServerConfig("127.0.0.1:0", grace_period_s=1.0, max_message_bytes=64 << 20),
                              tenants_file=str(self.tenants_file), policies_dir=str(ROOT / "config" / "policies"),
                              lifecycle=LifecycleConfig(store_path=str(self.workdir / "store.sqlite"),
                                                        audit_path=str(self.workdir / "audit.sqlite")))
        self.router = Router(config, PolicyLifecycle.open(config))  # tracing is on: its channels get instrumented
        await self.router.service.start()

    async def stop(self) -> None:
        if self.router is not None:
            await self.router.service.stop()
        await self.text.stop()


@pytest.fixture(scope="module")
async def traced(tenants_file: Path, tmp_path_factory: pytest.TempPathFactory
                 ) -> AsyncIterator[tuple[InProcessMesh, InMemoryTracing]]:
    with InMemoryTracing() as tracing:
        mesh = InProcessMesh(tenants_file, tmp_path_factory.mktemp("observability"))
        await mesh.start()
        try:
            yield mesh, tracing
        finally:
            await mesh.stop()


async def test_one_trace_spans_the_router_and_the_text_service(traced: tuple[InProcessMesh, InMemoryTracing]) -> None:
    mesh, tracing = traced
    assert mesh.router is not None
    async with grpc.aio.insecure_channel(f"127.0.0.1:{mesh.router.service.port}") as channel:
        response = await pb_grpc.ModerationServiceStub(channel).Moderate(
            text_request("have a great day"), metadata=[("x-api-key", KEY_A)], timeout=30)
    assert response.decision == pb.ALLOW
    assert {t.stage for t in response.timings} >= {"admission", "text", "fusion", "total"}

    (rpc,) = [s for s in tracing.named(MODERATE) if s.kind == SpanKind.SERVER]
    trace_id = ids(rpc)[0]
    spans = [s for s in tracing.spans() if ids(s)[0] == trace_id]
    (item,) = [s for s in spans if s.name == "auditmesh.moderate_item"]
    (client,) = [s for s in spans if s.name == MODEL_INFER and s.kind == SpanKind.CLIENT]
    (served,) = [s for s in spans if s.name == MODEL_INFER and s.kind == SpanKind.SERVER]
    (batch,) = [s for s in spans if s.name == "batch text_moderation"]
    (dispatch,) = [s for s in spans if s.name == "dispatch text"]
    assert parent_ids(item) == ids(rpc)
    # the router's batch span: child of (and linked to) the item, through the router's scheduler
    assert parent_ids(dispatch) == ids(item) and [(l.context.trace_id, l.context.span_id) for l in dispatch.links] == [ids(item)]
    assert parent_ids(client) == ids(dispatch)
    assert parent_ids(served) == ids(client)  # across the process boundary: traceparent metadata
    assert parent_ids(batch) == ids(served) and [(l.context.trace_id, l.context.span_id) for l in batch.links] == [ids(served)]
    assert item.attributes is not None and batch.attributes is not None
    assert item.attributes["auditmesh.tenant"] == "tenant-a" and item.attributes["auditmesh.qos_class"] == "standard"
    assert item.attributes["auditmesh.decision"] == "allow"
    assert batch.attributes["auditmesh.model"] == "text_moderation" and batch.attributes["auditmesh.batch_size"] == 1
    # the timings in the response agree with the spans (the client span lies inside the text stage)
    text_ms = next(t.duration_ms for t in response.timings if t.stage == "text")
    assert client.end_time is not None and client.start_time is not None
    assert (client.end_time - client.start_time) / 1e6 <= text_ms + 1.0


async def test_an_unsampled_caller_is_followed_through_the_router_and_the_text_service(
        traced: tuple[InProcessMesh, InMemoryTracing]) -> None:
    """The caller's "not sampled" flag must reach the text service: with this module's always-on sampler, a
    text service that did not get it would start (and record) a trace of its own."""
    mesh, tracing = traced
    assert mesh.router is not None
    tracing.exporter.clear()
    with uninstrumented_channels():  # the test's own channel must not start a trace
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{mesh.router.service.port}")
    async with channel:
        response = await pb_grpc.ModerationServiceStub(channel).Moderate(
            text_request("see you at the match", "obs-unsampled"), timeout=30,
            metadata=[("x-api-key", KEY_A), ("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00")])
    assert response.decision == pb.ALLOW
    assert tracing.spans() == []


async def test_degraded_stages_are_counted_by_reason(traced: tuple[InProcessMesh, InMemoryTracing]) -> None:
    from bench.render import render_photo_like

    mesh, _ = traced
    assert mesh.router is not None
    request = text_request("a caption", "obs-2")
    request.item.parts.add(image=pb.Image(data=render_photo_like((160, 120), seed=4)))
    async with grpc.aio.insecure_channel(f"127.0.0.1:{mesh.router.service.port}") as channel:
        response = await pb_grpc.ModerationServiceStub(channel).Moderate(request, metadata=[("x-api-key", KEY_A)],
                                                                         timeout=30)
    assert response.degraded and {d.stage for d in response.degradations} == {"vision", "ocr"}
    value = mesh.router.registry.get_sample_value
    for stage in ("vision", "ocr"):
        assert value("auditmesh_router_degraded_total", {"stage": stage, "reason": "unavailable",
                                                         "handling": "fail_open"}) == 1


async def test_a_batch_span_links_to_the_model_infer_span_of_every_row(
        traced: tuple[InProcessMesh, InMemoryTracing]) -> None:
    _, tracing = traced  # tracing is on for this module
    tracing.exporter.clear()
    model = GatedModel()
    config = ModalityServiceConfig("text", ServerConfig("127.0.0.1:0", grace_period_s=1.0),
                                   batching=BatchingConfig(max_batch_size=8))
    service, servicer = build_service(config, [model])
    port = await service.start()
    client = triton_aio.InferenceServerClient(f"127.0.0.1:{port}")

    async def infer(caller: str) -> None:
        tensor = InferInput("TEXT", [1, 1], "BYTES")
        tensor.set_data_from_numpy(np.array([[caller.encode()]], dtype=np.object_))
        with tracer().start_as_current_span(caller):  # each caller: its own trace
            await client.infer("gated", [tensor])

    try:
        model.hold.set()
        first = asyncio.create_task(infer("caller-0"))
        assert await asyncio.to_thread(model.entered.wait, 10.0)  # batch 1 holds the model
        rest = [asyncio.create_task(infer(f"caller-{i}")) for i in (1, 2, 3)]
        runner = servicer.runners["gated"]
        for _ in range(500):  # until the three calls are queued behind batch 1
            if runner.batcher.queue_depth == 3:
                break
            await asyncio.sleep(0.01)
        model.hold.clear()
        model.gate.set()
        await asyncio.gather(first, *rest)
    finally:
        await client.close()
        await service.stop()
    assert model.batches == [1, 3]
    callers = {span.name: ids(span)[0] for span in tracing.spans() if span.name.startswith("caller-")}
    served = {ids(span)[0]: span for span in tracing.named(MODEL_INFER) if span.kind == SpanKind.SERVER}
    assert len(set(callers.values())) == 4 and set(served) == set(callers.values())
    big = max(tracing.named("batch gated"), key=lambda span: len(span.links))
    linked = {(link.context.trace_id, link.context.span_id) for link in big.links}
    assert linked == {ids(served[callers[f"caller-{i}"]]) for i in (1, 2, 3)}
    assert parent_ids(big) in linked  # the batch belongs to (the trace of) one of its rows


def test_metrics_endpoints_count_requests_by_tenant_decision_and_code(mesh: Mesh) -> None:
    router_port, text_port = mesh.metrics_port("router"), mesh.metrics_port("text")
    before, text_before = scrape(router_port), scrape(text_port)
    with grpc.insecure_channel(mesh.address("router")) as channel:
        stub = pb_grpc.ModerationServiceStub(channel)
        for i in range(2):
            assert stub.Moderate(text_request(f"thanks for the lovely dinner, number {i}"), metadata=[("x-api-key", KEY_A)],
                                 timeout=30).decision == pb.ALLOW
        with pytest.raises(grpc.RpcError) as refused:
            stub.Moderate(text_request("hello"), metadata=[("x-api-key", "not-a-key")], timeout=30)
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
    after, text_after = scrape(router_port), scrape(text_port)

    def moved(name: str, **labels: str) -> float:
        return sample(after, name, **labels) - sample(before, name, **labels)

    assert moved("auditmesh_router_requests_total", tenant="tenant-a", qos_class="standard", decision="allow", code="OK") == 2
    assert moved("auditmesh_router_requests_total", tenant="unknown", qos_class="unknown", decision="none",
                 code="UNAUTHENTICATED") == 1
    assert moved("auditmesh_router_request_duration_seconds_count", tenant="tenant-a", qos_class="standard") == 2
    for stage in ("admission", "text", "fusion"):
        assert moved("auditmesh_router_stage_duration_seconds_count", qos_class="standard", stage=stage) == 2
    assert sample(after, "auditmesh_router_in_flight_items", qos_class="standard") == 0
    assert sample(after, "auditmesh_router_queue_depth", upstream="text") == 0
    assert sample(after, "auditmesh_router_policy_info", policy="default", version="2026-12-02.1") == 1
    assert sample(after, "auditmesh_build_info", service="router", version="0.1.0") == 1

    def text_moved(name: str, **labels: str) -> float:
        return sample(text_after, name, **labels) - sample(text_before, name, **labels)

    assert text_moved("auditmesh_model_requests_total", model="text_moderation", code="OK") == 2
    assert 1 <= text_moved("auditmesh_model_batch_size_count", model="text_moderation") <= 2
    assert text_moved("auditmesh_model_batch_size_sum", model="text_moderation") == 2
    assert text_moved("auditmesh_model_queue_wait_seconds_count", model="text_moderation") == 2
    assert sample(text_after, "auditmesh_model_queue_depth", model="text_moderation") == 0
    assert any(name == "auditmesh_model_info" and dict(labels)["model"] == "text_moderation" for name, labels in text_after)
