"""auditmesh.client against the real mesh: auto-batching, per-caller errors, RetryInfo retries,
round robin, and the chat helper over ModerateStream, in order and out of order."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any, Callable

import grpc
import pytest

from auditmesh.client import AsyncClient, Client, Item, ModerationError, RetryPolicy, Verdict
from auditmesh.client.settings import API_KEY_ENV
from services.launcher import Mesh, free_base_port
from bench.render import render_text_image
from tests.stubs import KEY_A, KEY_LIMITED

CLEAN, TOXIC = "Thanks for the lovely dinner last night, see you on Friday!", "你这个傻逼，滚"


class CallCounter(grpc.aio.UnaryUnaryClientInterceptor):
    """Counts the client's unary calls by method and final status, as the router sees them."""

    def __init__(self) -> None:
        self.calls: Counter[tuple[str, str]] = Counter()

    async def intercept_unary_unary(self, continuation: Callable[..., Any], client_call_details: Any, request: Any) -> Any:
        call = await continuation(client_call_details, request)
        method = client_call_details.method
        name = (method.decode() if isinstance(method, bytes) else str(method)).rsplit("/", 1)[-1]
        self.calls[(name, (await call.code()).name)] += 1
        return call

    def count(self, method: str, code: str | None = None) -> int:
        return sum(n for (name, status), n in self.calls.items() if name == method and code in (None, status))


def client_for(mesh: Mesh, counter: CallCounter | None = None, **options: Any) -> AsyncClient:
    return AsyncClient([mesh.address("router")], api_key=options.pop("api_key", KEY_A),
                       interceptors=[counter] if counter else (), **options)


async def test_concurrent_single_calls_share_batch_calls_and_each_gets_its_own_verdict(mesh: Mesh) -> None:
    counter = CallCounter()
    async with client_for(mesh, counter, linger_ms=50, max_batch_items=8, send_when_idle=False, timeout_s=30) as client:
        texts = [TOXIC if i % 4 == 0 else f"{CLEAN} ({i})" for i in range(16)]
        verdicts = await asyncio.gather(*(client.moderate(text=text, item_id=f"it-{i}") for i, text in enumerate(texts)))
    assert [v.item_id for v in verdicts] == [f"it-{i}" for i in range(16)]
    assert [v.decision for v in verdicts] == ["block" if i % 4 == 0 else "allow" for i in range(16)]
    assert counter.count("Moderate") == 0
    assert 2 <= counter.count("ModerateBatch", "OK") <= 4 < 16   # 16 items, batches of at most 8


async def test_an_invalid_item_fails_only_its_caller(mesh: Mesh) -> None:
    counter = CallCounter()
    async with client_for(mesh, counter, linger_ms=50, send_when_idle=False, timeout_s=30) as client:
        results = await asyncio.gather(client.moderate(text=CLEAN), client.moderate(text=""),
                                       client.moderate(images=[b"not an image"]), client.moderate(text=TOXIC),
                                       return_exceptions=True)
    assert isinstance(results[0], Verdict) and results[0].decision == "allow"
    assert isinstance(results[3], Verdict) and results[3].decision == "block"
    for failed in results[1:3]:
        assert isinstance(failed, ModerationError) and failed.code is grpc.StatusCode.INVALID_ARGUMENT, failed
        assert failed.attempts == 1   # not retried
    assert "image" in str(results[2])
    assert counter.count("ModerateBatch") == 1


async def test_moderate_many_splits_a_batch_over_the_tenants_burst_and_retries_after_retry_info(mesh: Mesh) -> None:
    counter = CallCounter()   # tenant "limited": 2 items/s, burst 3
    async with client_for(mesh, counter, api_key=KEY_LIMITED, max_batch_items=6, timeout_s=20) as client:
        started = time.monotonic()
        results = await client.moderate_many([f"{CLEAN} #{i}" for i in range(6)])
        elapsed = time.monotonic() - started
    assert all(isinstance(r, Verdict) and r.decision == "allow" for r in results), results
    assert counter.count("ModerateBatch", "RESOURCE_EXHAUSTED") >= 1   # refused first, with RetryInfo
    assert counter.count("ModerateBatch", "OK") >= 2
    assert elapsed >= 1.0   # 6 items at 2/s from a burst of 3: the router's retry delays were waited out


async def test_a_refused_call_is_retried_after_the_routers_retry_info(mesh: Mesh) -> None:
    counter = CallCounter()
    async with client_for(mesh, counter, api_key=KEY_LIMITED, batching=False, timeout_s=20) as client:
        results = [await client.moderate(text=f"{CLEAN} {i}") for i in range(6)]
    assert all(r.decision == "allow" for r in results)
    assert counter.count("Moderate", "RESOURCE_EXHAUSTED") >= 1
    assert counter.count("Moderate", "OK") == 6


async def test_without_retries_the_refusal_reaches_the_caller_with_its_retry_hint(mesh: Mesh) -> None:
    async with client_for(mesh, api_key=KEY_LIMITED, batching=False, retry=RetryPolicy(max_attempts=1)) as client:
        outcomes = await asyncio.gather(*(client.moderate(text=f"{CLEAN} {i}") for i in range(6)), return_exceptions=True)
    refused = [o for o in outcomes if isinstance(o, ModerationError)]
    assert refused, outcomes
    assert all(r.code is grpc.StatusCode.RESOURCE_EXHAUSTED and r.retry_after_s and r.retry_after_s > 0 for r in refused)


async def test_calls_go_round_robin_and_an_unreachable_router_is_skipped(mesh: Mesh) -> None:
    dead = f"127.0.0.1:{free_base_port(1)}"
    counter = CallCounter()
    retry = RetryPolicy(max_attempts=3, initial_backoff_s=0.01, max_backoff_s=0.02)
    async with AsyncClient([dead, mesh.address("router")], api_key=KEY_A, batching=False, retry=retry, timeout_s=10,
                           interceptors=[counter]) as client:
        verdicts = [await client.moderate(text=f"{CLEAN} {i}") for i in range(4)]
    assert all(v.decision == "allow" for v in verdicts)
    assert counter.count("Moderate", "UNAVAILABLE") >= 1 and counter.count("Moderate", "OK") == 4


async def test_chat_in_order_delivers_in_send_order_even_when_an_image_answer_is_slower(mesh: Mesh) -> None:
    image = render_text_image(["Visit our store"], background="white", seed=1)
    async with client_for(mesh, timeout_s=30) as client, client.chat(ordered=True, deadline_ms=20000) as chat:
        sent = [await chat.send(images=[image], item_id="picture")]
        sent += [await chat.send(text, item_id=f"t{i}") for i, text in enumerate([CLEAN, TOXIC, "gg wp"])]
        await chat.done_sending()
        replies = [reply async for reply in chat]
    assert [r.request_id for r in replies] == sent
    assert all(r.ok for r in replies), replies
    assert [r.verdict.decision for r in replies if r.verdict][1:] == ["allow", "block", "allow"]


async def test_chat_out_of_order_delivers_fast_answers_before_a_slow_one(mesh: Mesh) -> None:
    image = render_text_image(["Visit our store", "Daily deals 2026"], background="noisy", seed=2)
    async with client_for(mesh, timeout_s=30) as client, client.chat(ordered=False, deadline_ms=20000) as chat:
        slow = await chat.send(images=[image])
        fast = [await chat.send(f"{CLEAN} {i}") for i in range(3)]
        await chat.done_sending()
        replies = [reply async for reply in chat]
    order = [r.request_id for r in replies]
    assert sorted(order) == sorted([slow, *fast])
    assert order[-1] == slow   # OCR takes ~150 ms, a text ~3 ms
    assert all(r.ok for r in replies)


async def test_chat_answers_a_bad_message_with_its_error_and_goes_on(mesh: Mesh) -> None:
    async with client_for(mesh) as client, client.chat(ordered=True) as chat:
        await chat.send("")
        await chat.send(TOXIC)
        await chat.done_sending()
        replies = [reply async for reply in chat]
    assert replies[0].error is not None and replies[0].error.code is grpc.StatusCode.INVALID_ARGUMENT
    assert replies[1].verdict is not None and replies[1].verdict.decision == "block"


async def test_chat_flow_control_stops_the_sender_at_the_window(mesh: Mesh) -> None:
    async with client_for(mesh, timeout_s=30) as client, client.chat(ordered=True, window=2) as chat:
        sent: list[str] = []

        async def produce() -> None:
            for i in range(5):
                sent.append(await chat.send(f"{CLEAN} {i}"))
            await chat.done_sending()

        producer = asyncio.create_task(produce())
        while len(sent) < 2:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.3)   # answers arrive meanwhile, but nobody takes them
        assert len(sent) == 2 and not producer.done()
        replies = [reply async for reply in chat]
        await producer
    assert [r.request_id for r in replies] == sent and len(sent) == 5


def test_the_blocking_client_batches_across_threads_and_reads_the_key_from_the_environment(
        mesh: Mesh, monkeypatch: pytest.MonkeyPatch) -> None:
    from concurrent.futures import ThreadPoolExecutor

    monkeypatch.setenv(API_KEY_ENV, KEY_A)
    with Client([mesh.address("router")], linger_ms=50, send_when_idle=False, timeout_s=30) as client:
        with ThreadPoolExecutor(8) as pool:
            verdicts = list(pool.map(lambda i: client.moderate(text=TOXIC if i == 3 else f"{CLEAN} {i}"), range(8)))
        many = client.moderate_many([Item(text=CLEAN, id="a"), "gg"])
        with client.chat(ordered=True) as chat:
            chat.send(TOXIC)
            chat.done_sending()
            replies = list(chat)
        calls = client.batch_calls
    assert [v.decision for v in verdicts] == ["block" if i == 3 else "allow" for i in range(8)]
    assert [r.item_id for r in many if isinstance(r, Verdict)] == ["a", ""]
    assert calls < 8 + 1
    assert [r.verdict.decision for r in replies if r.verdict] == ["block"]


def test_a_blocking_chat_can_be_the_first_call_of_a_client(mesh: Mesh) -> None:
    with Client([mesh.address("router")], api_key=KEY_A, timeout_s=30) as client, \
            client.chat(ordered=False) as chat:
        sent = chat.send(CLEAN)
        reply = chat.receive(timeout_s=30)
    assert reply.request_id == sent and reply.verdict is not None and reply.verdict.decision == "allow"
