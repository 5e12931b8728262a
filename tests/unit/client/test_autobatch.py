"""auditmesh.client.autobatch: concurrent submits share batch calls; each caller gets its own outcome."""

from __future__ import annotations

import asyncio
from typing import Sequence

import grpc
import pytest

from auditmesh.client.autobatch import AutoBatcher
from auditmesh.client.errors import ClientClosedError, ModerationError
from auditmesh.client.retry import RetryPolicy
from tests.stubs import ScriptedBatchSend

FAST_RETRY = RetryPolicy(max_attempts=3, initial_backoff_s=0.001, max_backoff_s=0.002)


def batcher(send: ScriptedBatchSend, *, linger_s: float = 0.0, max_items: int = 64, retry: RetryPolicy = FAST_RETRY,
            send_when_idle: bool = False) -> AutoBatcher[object]:
    return AutoBatcher(send, linger_s=linger_s, max_items=max_items, retry=retry, send_when_idle=send_when_idle)


def deadline(seconds: float = 5.0) -> float:
    return asyncio.get_running_loop().time() + seconds


async def submit_all(auto: AutoBatcher[object], items: Sequence[str], key: str = "p") -> list[object]:
    return await asyncio.gather(*(auto.submit(key, item, deadline=deadline()) for item in items), return_exceptions=True)


async def test_concurrent_calls_share_one_batch_call_and_each_gets_its_own_result() -> None:
    send = ScriptedBatchSend()
    auto = batcher(send)
    assert await submit_all(auto, ["a", "b", "c"]) == ["ok:a", "ok:b", "ok:c"]
    assert send.calls == [["a", "b", "c"]]
    assert auto.calls_sent == 1 and auto.items_sent == 3


async def test_a_full_batch_goes_out_without_waiting_for_linger() -> None:
    send = ScriptedBatchSend()
    auto = batcher(send, linger_s=60.0, max_items=2)
    assert await submit_all(auto, ["a", "b"]) == ["ok:a", "ok:b"]   # would hang for a minute otherwise
    assert send.calls == [["a", "b"]]


async def test_when_idle_a_lone_item_goes_at_once_and_items_arriving_during_a_call_wait_for_it() -> None:
    gate = asyncio.Event()
    send = ScriptedBatchSend(gate=gate)
    auto = batcher(send, linger_s=60.0, send_when_idle=True)
    first = asyncio.ensure_future(auto.submit("p", "a", deadline=deadline()))
    while not send.calls:
        await asyncio.sleep(0)
    later = [asyncio.ensure_future(auto.submit("p", item, deadline=deadline())) for item in "bc"]
    for _ in range(5):
        await asyncio.sleep(0)
    assert send.calls == [["a"]]   # b and c linger while "a" is in flight
    gate.set()
    assert await first == "ok:a" and await asyncio.gather(*later) == ["ok:b", "ok:c"]
    assert send.calls == [["a"], ["b", "c"]]   # sent together as soon as the call came back


async def test_batches_are_cut_at_max_items_and_per_key() -> None:
    send = ScriptedBatchSend()
    auto = batcher(send, max_items=2)
    results = await asyncio.gather(submit_all(auto, ["a", "b", "c"], key="default"), submit_all(auto, ["x"], key="strict"))
    assert list(results) == [["ok:a", "ok:b", "ok:c"], ["ok:x"]]
    assert sorted(send.calls, key=str) == [["a", "b"], ["c"], ["x"]]


async def test_a_per_item_error_reaches_only_its_caller() -> None:
    bad = ModerationError(grpc.StatusCode.INVALID_ARGUMENT, "items[1].parts[0]: empty text")
    send = ScriptedBatchSend(lambda items: [bad if item == "" else f"ok:{item}" for item in items])
    results = await submit_all(batcher(send), ["a", "", "c"])
    assert results[0] == "ok:a" and results[2] == "ok:c"
    assert isinstance(results[1], ModerationError) and results[1].code is grpc.StatusCode.INVALID_ARGUMENT
    assert len(send.calls) == 1   # not retried


async def test_an_item_refused_with_retry_info_is_sent_again_in_a_later_batch() -> None:
    refusals = {"b": 1}

    def answer(items: Sequence[object]) -> list[object]:
        out: list[object] = []
        for item in items:
            if refusals.get(str(item), 0):
                refusals[str(item)] -= 1
                out.append(ModerationError(grpc.StatusCode.RESOURCE_EXHAUSTED, "over quota", retry_after_s=0.001))
            else:
                out.append(f"ok:{item}")
        return out

    send = ScriptedBatchSend(answer)
    assert await submit_all(batcher(send), ["a", "b"]) == ["ok:a", "ok:b"]
    assert send.calls == [["a", "b"], ["b"]]


async def test_retries_stop_at_max_attempts_and_the_error_says_how_many() -> None:
    down = ModerationError(grpc.StatusCode.UNAVAILABLE, "connection refused")

    def answer(items: Sequence[object]) -> list[object]:
        raise down

    send = ScriptedBatchSend(answer)
    [result] = await submit_all(batcher(send), ["a"])
    assert isinstance(result, ModerationError) and result.code is grpc.StatusCode.UNAVAILABLE
    assert result.attempts == 3 and len(send.calls) == 3


async def test_a_batch_refused_whole_as_too_big_is_split_until_it_fits() -> None:
    def answer(items: Sequence[object]) -> list[object]:
        if len(items) > 2:
            raise ModerationError(grpc.StatusCode.RESOURCE_EXHAUSTED, f"{len(items)} items is over the burst of 2",
                                  retry_after_s=0.0)
        return [f"ok:{item}" for item in items]

    send = ScriptedBatchSend(answer)
    auto = batcher(send, max_items=8)
    assert await submit_all(auto, list("abcde")) == [f"ok:{c}" for c in "abcde"]
    assert send.calls[0] == list("abcde")
    assert all(len(call) <= 2 for call in send.calls[1:])
    assert sorted(str(item) for call in send.calls[1:] for item in call) == list("abcde")


async def test_a_whole_call_error_that_is_not_retryable_fails_every_caller_once() -> None:
    def answer(items: Sequence[object]) -> list[object]:
        raise ModerationError(grpc.StatusCode.UNAUTHENTICATED, "unknown API key")

    send = ScriptedBatchSend(answer)
    results = await submit_all(batcher(send), ["a", "b"])
    assert all(isinstance(r, ModerationError) and r.code is grpc.StatusCode.UNAUTHENTICATED for r in results)
    assert len(send.calls) == 1


async def test_an_unanswered_item_fails_at_its_deadline() -> None:
    gate = asyncio.Event()
    send = ScriptedBatchSend(gate=gate)
    auto = batcher(send)
    with pytest.raises(ModerationError) as caught:
        await auto.submit("p", "a", deadline=deadline(0.02))
    assert caught.value.code is grpc.StatusCode.DEADLINE_EXCEEDED
    assert send.timeouts[0] == pytest.approx(0.02, abs=0.01)   # the batch call carries the deadline
    gate.set()
    await auto.close()


async def test_a_cancelled_caller_is_dropped_before_its_batch_is_sent() -> None:
    send = ScriptedBatchSend()
    auto = batcher(send, linger_s=60.0)
    waiting = asyncio.ensure_future(auto.submit("p", "gone", deadline=deadline()))
    await asyncio.sleep(0)
    waiting.cancel()
    kept = asyncio.ensure_future(auto.submit("p", "kept", deadline=deadline()))
    await asyncio.sleep(0)
    await auto.close()   # flushes
    assert await kept == "ok:kept"
    assert send.calls == [["kept"]]


async def test_close_sends_what_waits_and_then_refuses_new_items() -> None:
    send = ScriptedBatchSend()
    auto = batcher(send, linger_s=60.0)
    pending = asyncio.ensure_future(auto.submit("p", "a", deadline=deadline()))
    await asyncio.sleep(0)
    await auto.close()
    assert pending.done() and pending.result() == "ok:a"
    with pytest.raises(ClientClosedError):
        await auto.submit("p", "b", deadline=deadline())


async def test_a_result_count_mismatch_fails_every_item_with_internal() -> None:
    send = ScriptedBatchSend(lambda items: ["only one"])
    results = await submit_all(batcher(send), ["a", "b"])
    assert all(isinstance(r, ModerationError) and r.code is grpc.StatusCode.INTERNAL for r in results)
