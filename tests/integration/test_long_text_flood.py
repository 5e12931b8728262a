"""A flood of maximum-length texts through the most expensive profile does not stall other tenants.

Tenant B (standard class, policy `strict`: profile accurate, MiniLM) sends 20,000-character posts (the
router's `limits.max_text_chars`) as fast as the mesh takes them; meanwhile tenant A (standard, default
policy) and the realtime chat tenant send short messages on the same lane. Every short message must be
answered, and correctly: a long text costs the text service a bounded number of MiniLM windows
(`services/text/windows.py: screened_infer`), and the router's fair queue serves tenant A its share.
Generous bounds: correctness checks, not benchmarks. Measured at this test's commit: the short messages'
worst latency was about 20 ms, and most of the flood was answered DEADLINE_EXCEEDED (it asks for far more
than the CPU has), the rest found the threat.

The short messages are ones the fast model answers alone. A message the balanced profile escalates to
`text_semantic` queues there behind tenant B's flood (the text service serves a model's queue by priority,
not by tenant): with the models of session 41, "see you at the cafe at 1, bring the charger" scored
violence 0.37, was escalated and waited 1.6 s. Such a second opinion gets half the item's remaining time
(`pipeline.SEMANTIC_SHARE`), then the item is answered on its first pass, degraded
(tests/unit/router/test_pipeline_profiles.py).
"""

from __future__ import annotations

import asyncio
import time

import grpc
import pytest
from auditmesh.v1 import moderation_pb2 as pb
from auditmesh.v1 import moderation_pb2_grpc as pb_grpc

from services.launcher import Mesh
from tests.stubs import KEY_A, KEY_B, KEY_CHAT, item

PARAGRAPH = ("We spent the weekend repainting the kitchen and the hallway. The blue came out lighter than the "
             "sample card, which we ended up liking more. Next month we will redo the bathroom tiles as well. ")
# Serial: it bounds another tenant's wait behind a flood, which other tests' load would skew (`make test` runs it alone).
pytestmark = [pytest.mark.slow, pytest.mark.serial]

THREAT = "I know where you live and I am going to come over tonight and kill you."


def long_post(i: int) -> str:
    """A 20,000-character post with one threat somewhere in its middle."""
    head = (PARAGRAPH * 120)[:9_000 + 37 * i]
    return (head + " " + THREAT + " " + PARAGRAPH * 120)[:20_000]


async def _flood_and_talk(address: str) -> tuple[dict[str, list[float]], dict[str, int], dict[str, int], list[str]]:
    options = [("grpc.max_send_message_length", 64 << 20)]
    async with grpc.aio.insecure_channel(address, options=options) as channel:
        stub = pb_grpc.ModerationServiceStub(channel)
        flood_outcomes: dict[str, int] = {}
        stop = asyncio.Event()

        async def flood_one(i: int) -> None:
            try:
                response = await stub.Moderate(pb.ModerateRequest(item=item(long_post(i))),
                                               metadata=[("x-api-key", KEY_B)], timeout=5.0)
                kind = "BLOCKED_OR_REVIEW" if response.decision != pb.ALLOW else "ALLOW"
                flood_outcomes[kind] = flood_outcomes.get(kind, 0) + 1
            except grpc.aio.AioRpcError as error:
                flood_outcomes[error.code().name] = flood_outcomes.get(error.code().name, 0) + 1

        async def flood() -> None:
            tasks = []
            i = 0
            while not stop.is_set():  # open loop: 20 posts (400,000 characters) a second
                tasks.append(asyncio.create_task(flood_one(i)))
                i += 1
                await asyncio.sleep(0.05)
            await asyncio.gather(*tasks)

        flooding = asyncio.create_task(flood())
        await asyncio.sleep(1.5)
        latencies: dict[str, list[float]] = {"tenant-a": [], "chat": []}
        failures: dict[str, int] = {"tenant-a": 0, "chat": 0}
        why: list[str] = []
        for i in range(16):
            for name, key in (("tenant-a", KEY_A), ("chat", KEY_CHAT)):
                started = time.monotonic()
                try:
                    response = await stub.Moderate(
                        pb.ModerateRequest(item=item(f"thanks for the lovely dinner, see you on friday at {i}")),
                        metadata=[("x-api-key", key)], timeout=3.0)
                    assert response.decision == pb.ALLOW, (name, response.categories)
                    latencies[name].append(time.monotonic() - started)
                except grpc.aio.AioRpcError as error:
                    failures[name] += 1
                    why.append(f"{name}: {error.code().name} {error.details()}")
            await asyncio.sleep(0.1)
        stop.set()
        await flooding
    return latencies, failures, flood_outcomes, why


def test_a_flood_of_maximum_length_accurate_texts_does_not_stall_other_tenants(mesh: Mesh) -> None:
    latencies, failures, flood_outcomes, why = asyncio.run(_flood_and_talk(mesh.address("router")))
    worst = {name: round(max(values), 3) if values else None for name, values in latencies.items()}
    assert failures == {"tenant-a": 0, "chat": 0}, \
        f"short messages failed ({why}); worst {worst}, flood {flood_outcomes}"
    assert max(latencies["chat"]) < 3.0 and max(latencies["tenant-a"]) < 3.0, worst
    # the flood was served as far as the mesh could, and what it answered found the buried threat
    assert flood_outcomes.get("BLOCKED_OR_REVIEW", 0) > 0 and flood_outcomes.get("ALLOW", 0) == 0, flood_outcomes
