"""Multi-tenant behaviour through the real mesh: a bulk flood (on the bulk lane) does not stop a
realtime tenant (on the interactive lane), a tenant calling the wrong lane is told which lane is its,
quotas answer RESOURCE_EXHAUSTED with RetryInfo. Generous bounds: correctness checks, not benchmarks."""

from __future__ import annotations

import asyncio
import time

import grpc
from auditmesh.v1 import moderation_pb2 as pb
from auditmesh.v1 import moderation_pb2_grpc as pb_grpc
from google.rpc import error_details_pb2, status_pb2

from services.launcher import Mesh
from bench.render import render_text_image
from tests.stubs import KEY_CHAT, KEY_FLOOD, KEY_LIMITED, item, moderate


def retry_info(error: grpc.RpcError) -> error_details_pb2.RetryInfo | None:
    for key, value in error.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            status = status_pb2.Status.FromString(value)
            for detail in status.details:
                info = error_details_pb2.RetryInfo()
                if detail.Unpack(info):
                    return info
    return None


def test_quota_rejection_carries_retry_info(stub: pb_grpc.ModerationServiceStub) -> None:
    codes = []
    for _ in range(6):
        try:
            moderate(stub, "hello", key=KEY_LIMITED)
            codes.append("OK")
        except grpc.RpcError as error:
            codes.append(error.code().name)
            assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "over its quota of 2 items/s" in error.details()
            info = retry_info(error)
            assert info is not None and 0 < info.retry_delay.ToNanoseconds() <= 1_000_000_000
    assert codes[:3] == ["OK"] * 3 and "RESOURCE_EXHAUSTED" in codes


def test_a_tenant_on_the_wrong_lane_is_told_its_lane(mesh: Mesh, stub: pb_grpc.ModerationServiceStub) -> None:
    try:
        moderate(stub, "hello", key=KEY_FLOOD)  # a bulk tenant on the interactive lane
        raise AssertionError("the interactive lane served a bulk tenant")
    except grpc.RpcError as error:
        assert error.code() == grpc.StatusCode.PERMISSION_DENIED
        assert "served by lane 'bulk'; this is lane 'interactive'" in error.details(), error.details()
    with grpc.insecure_channel(mesh.address("router-bulk")) as channel:
        bulk = pb_grpc.ModerationServiceStub(channel)
        assert moderate(bulk, "hello", key=KEY_FLOOD).decision == pb.ALLOW
        try:
            moderate(bulk, "hello", key=KEY_CHAT)
            raise AssertionError("the bulk lane served a realtime tenant")
        except grpc.RpcError as error:
            assert error.code() == grpc.StatusCode.PERMISSION_DENIED and "lane 'interactive'" in error.details()


async def _flood_and_chat(chat_address: str, flood_address: str) -> tuple[list[float], int, dict[str, int]]:
    image = render_text_image(["bulk rescan item", "批量复查"], seed=11)
    options = [("grpc.max_send_message_length", 64 << 20)]
    async with grpc.aio.insecure_channel(chat_address, options=options) as channel, \
            grpc.aio.insecure_channel(flood_address, options=options) as flood_channel:
        stub = pb_grpc.ModerationServiceStub(channel)
        flood_stub = pb_grpc.ModerationServiceStub(flood_channel)
        outcomes: dict[str, int] = {}
        stop = asyncio.Event()

        async def flood_one(i: int) -> None:
            try:
                response = await flood_stub.Moderate(pb.ModerateRequest(item=item(f"bulk text {i}", image)),
                                               metadata=[("x-api-key", KEY_FLOOD)], timeout=2.0)
                kind = "OK_DEGRADED" if response.degraded else "OK"
                outcomes[kind] = outcomes.get(kind, 0) + 1
            except grpc.aio.AioRpcError as error:
                outcomes[error.code().name] = outcomes.get(error.code().name, 0) + 1

        async def flood() -> None:
            tasks = []
            i = 0
            while not stop.is_set():  # open loop: 40 items/s of text + image, far over what OCR can do
                tasks.append(asyncio.create_task(flood_one(i)))
                i += 1
                await asyncio.sleep(0.025)
            await asyncio.gather(*tasks)

        flooding = asyncio.create_task(flood())
        await asyncio.sleep(1.0)
        latencies, failures = [], 0
        for i in range(20):
            started = time.monotonic()
            try:
                response = await stub.Moderate(pb.ModerateRequest(item=item(f"hey, are we still meeting at {i} tonight?")),
                                               metadata=[("x-api-key", KEY_CHAT)], timeout=1.0)
                assert response.decision == pb.ALLOW, (response.degradations, response.categories)
                latencies.append(time.monotonic() - started)
            except grpc.aio.AioRpcError:
                failures += 1
            await asyncio.sleep(0.05)
        stop.set()
        await flooding
    return latencies, failures, outcomes


def test_realtime_tenant_keeps_answering_under_a_bulk_flood(mesh: Mesh) -> None:
    latencies, failures, flood_outcomes = asyncio.run(_flood_and_chat(mesh.address("router"), mesh.address("router-bulk")))
    assert failures == 0, f"chat requests failed during the flood; flood outcomes {flood_outcomes}"
    assert max(latencies) < 1.0
    assert sum(flood_outcomes.values()) > 50
    # overload handling engaged for the bulk tenant: stages skipped (its degrade list) or items shed
    assert flood_outcomes.get("OK_DEGRADED", 0) + flood_outcomes.get("DEADLINE_EXCEEDED", 0) > 0, flood_outcomes
