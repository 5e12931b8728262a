"""auditmesh.client.chat over a fake stream: order, flow control, local deadlines, a failing stream."""

from __future__ import annotations

import asyncio

import grpc
import pytest
from auditmesh.v1 import moderation_pb2 as pb

from auditmesh.client.chat import AsyncChat
from auditmesh.client.errors import ModerationError
from tests.stubs import FakeStreamCall, FakeStreamStub


def chat_over(call: FakeStreamCall, **options: object) -> AsyncChat:
    return AsyncChat(FakeStreamStub(call), (("x-api-key", "k"),), **options)  # type: ignore[arg-type]


async def test_ordered_chat_delivers_in_send_order_whatever_the_answer_order() -> None:
    call = FakeStreamCall()
    async with chat_over(call, ordered=True) as chat:
        ids = [await chat.send(text) for text in ("a", "b", "c")]
        assert [r.item.parts[0].text for r in call.written] == ["a", "b", "c"]
        assert all(r.deadline_ms == 2000 for r in call.written)
        for rid in reversed(ids):
            call.reply(rid)
        replies = [await chat.receive() for _ in ids]
        assert [r.request_id for r in replies] == ids


async def test_unordered_chat_delivers_as_answers_arrive() -> None:
    call = FakeStreamCall()
    async with chat_over(call, ordered=False) as chat:
        first, second = await chat.send("a"), await chat.send("b")
        call.reply(second, decision=pb.BLOCK)
        reply = await chat.receive()
        assert reply.request_id == second and reply.verdict is not None and reply.verdict.blocked
        call.reply(first)
        assert (await chat.receive()).request_id == first


async def test_the_sender_waits_while_the_window_is_full_until_the_caller_takes_an_answer() -> None:
    call = FakeStreamCall()
    async with chat_over(call, window=2) as chat:
        first = await chat.send("a")
        second = await chat.send("b")
        third = asyncio.ensure_future(chat.send("c"))
        call.reply(first)
        for _ in range(10):
            await asyncio.sleep(0)
        assert not third.done() and len(call.written) == 2   # answered, but not yet taken by the caller
        await chat.receive()
        last = await third
        assert len(call.written) == 3
        call.reply(second)
        call.reply(last)


async def test_a_message_unanswered_at_its_deadline_is_answered_locally_and_a_late_answer_dropped() -> None:
    call = FakeStreamCall()
    async with chat_over(call, grace_s=0.0) as chat:
        rid = await chat.send("a", deadline_ms=5)
        reply = await chat.receive()
        assert reply.request_id == rid and reply.error is not None
        assert reply.error.code is grpc.StatusCode.DEADLINE_EXCEEDED
        call.reply(rid)   # late: ignored
        await chat.done_sending()
        with pytest.raises(StopAsyncIteration):
            await chat.receive()


async def test_a_failed_stream_answers_every_outstanding_message_and_refuses_new_ones() -> None:
    call = FakeStreamCall()
    chat = chat_over(call)
    await chat.__aenter__()
    outstanding = [await chat.send(text) for text in ("a", "b")]
    call.fail(grpc.aio.AioRpcError(grpc.StatusCode.UNAVAILABLE, grpc.aio.Metadata(), grpc.aio.Metadata(),
                                   details="router went away"))
    replies = [await chat.receive() for _ in outstanding]
    assert [r.request_id for r in replies] == outstanding
    assert all(r.error is not None and r.error.code is grpc.StatusCode.UNAVAILABLE for r in replies)
    with pytest.raises(ModerationError, match="router went away"):
        await chat.send("c")
    await chat.close()
    assert call.cancelled


async def test_a_per_message_error_from_the_router_reaches_that_message_only() -> None:
    call = FakeStreamCall()
    async with chat_over(call) as chat:
        bad, good = await chat.send(""), await chat.send("fine")
        call._responses.put_nowait(pb.ModerateResponse(request_id=bad, error={"code": 3, "message": "empty text"}))
        call.reply(good)
        replies = [await chat.receive(), await chat.receive()]
        await chat.done_sending()
    assert replies[0].error is not None and replies[0].error.code is grpc.StatusCode.INVALID_ARGUMENT
    assert replies[1].ok and call.done_writing_called
