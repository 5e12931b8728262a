"""A freshly started mesh offered images at half of what it can serve sheds nothing (issue 15).

Before, a cold or stale batch-cost estimate refused servable images ("shed early: the expected wait of
2504 ms is longer than the 1991 ms left") at a fraction of the capacity. The capacity here is the
image services' own warm cost (each reports one warm run of its model in ModelConfig's `warmup`
parameter, measured at start on this same machine): vision and OCR share the image CPU in the
shipped placement, so one image costs their sum.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Iterator

import grpc
import pytest
import tritonclient.grpc as triton
from auditmesh.v1 import moderation_pb2 as pb
from auditmesh.v1 import moderation_pb2_grpc as pb_grpc

from services.launcher import Mesh, free_base_port
from services.router.dispatch import parse_warmup
from bench.render import render_text_image
from tests.mesh_fixtures import running
from tests.stubs import KEY_A, MeshTritonClient, item

# Serial: it sends at half the measured capacity, which other tests' load would skew (`make test` runs it alone).
pytestmark = pytest.mark.serial

IMAGES = 16
DEADLINE_S = 2.0  # the router's default deadline, as in the report that filed the issue


@pytest.fixture(scope="module")
def fresh_mesh(tenants_file: Path) -> Iterator[Mesh]:
    fresh = Mesh(base_port=free_base_port(), extra_env={"AUDITMESH_TENANTS_FILE": str(tenants_file)})
    with running(fresh):
        yield fresh


def warm_seconds_per_image(mesh: Mesh, service: str, model: str) -> float:
    client = MeshTritonClient(triton.InferenceServerClient(mesh.address(service)), mesh.internal_metadata())
    try:
        parameter = client.get_model_config(model).config.parameters["warmup"].string_value
    finally:
        client.close()
    items, seconds = parse_warmup(parameter)
    assert items >= 1 and seconds > 0, f"{service} reported no warm-up cost ({parameter!r})"
    return seconds / items


def test_half_of_the_image_capacity_is_served_without_shedding(fresh_mesh: Mesh) -> None:
    per_image_s = warm_seconds_per_image(fresh_mesh, "ocr", "ocr") + warm_seconds_per_image(fresh_mesh, "vision", "image_safety")
    interval_s = 2 * per_image_s  # 50 % of the capacity
    images = [render_text_image(["Daily deals 2026", "内容审核测试"], seed=seed, background="noisy") for seed in range(4)]
    with grpc.insecure_channel(fresh_mesh.address("router"), options=[("grpc.max_send_message_length", 64 << 20)]) as channel:
        stub = pb_grpc.ModerationServiceStub(channel)

        def send(index: int) -> tuple[str, list[str]]:
            time.sleep(index * interval_s)  # paced arrivals, from the moment the mesh first serves
            request = pb.ModerateRequest(request_id=f"half-{index}", item=item(images[index % len(images)]))
            try:
                response = stub.Moderate(request, metadata=[("x-api-key", KEY_A)], timeout=DEADLINE_S)
            except grpc.RpcError as error:
                return f"{error.code().name}: {error.details()}", []
            return "OK", [str(d).replace("\n", " ") for d in response.degradations]

        with ThreadPoolExecutor(max_workers=IMAGES) as pool:
            outcomes = list(pool.map(send, range(IMAGES)))
    refused = [outcome for outcome in outcomes if outcome[0] != "OK" or outcome[1]]
    assert not refused, f"at {1 / interval_s:.2f} images/s ({per_image_s * 1000:.0f} ms per image warm): {refused}"
