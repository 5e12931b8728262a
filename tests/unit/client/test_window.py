"""auditmesh.client.window: the chat's outstanding messages, delivery order, deadlines, flow control."""

from __future__ import annotations

import pytest

from auditmesh.client.window import ChatWindow


def opened(ids: str, *, ordered: bool, capacity: int = 8, deadline: float = 10.0) -> ChatWindow[str]:
    window: ChatWindow[str] = ChatWindow(capacity=capacity, ordered=ordered)
    for rid in ids:
        window.open(rid, deadline=deadline)
    return window


def test_ordered_delivery_holds_an_early_answer_until_those_before_it() -> None:
    window = opened("abc", ordered=True)
    window.answer("c", "C")
    window.answer("b", "B")
    assert window.take() == []
    window.answer("a", "A")
    assert window.take(1) == [("a", "A")]
    assert window.take() == [("b", "B"), ("c", "C")]


def test_unordered_delivery_hands_answers_out_as_they_arrive() -> None:
    window = opened("abc", ordered=False)
    window.answer("c", "C")
    assert window.take() == [("c", "C")]
    window.answer("a", "A")
    window.answer("b", "B")
    assert window.take(1) == [("a", "A")]
    assert window.take() == [("b", "B")]


def test_the_window_has_room_again_only_when_the_caller_takes_answers() -> None:
    window = opened("ab", ordered=False, capacity=2)
    assert not window.has_room
    with pytest.raises(OverflowError):
        window.open("c", deadline=1.0)
    window.answer("a", "A")
    assert not window.has_room   # answered but not consumed: still held in memory
    window.take()
    assert window.has_room


def test_overdue_reports_unanswered_messages_past_their_deadline_and_late_answers_are_dropped() -> None:
    window: ChatWindow[str] = ChatWindow(capacity=4, ordered=True)
    window.open("a", deadline=1.0)
    window.open("b", deadline=2.0)
    window.answer("b", "B")
    assert window.next_deadline() == 1.0
    assert window.overdue(0.5) == []
    assert window.overdue(1.5) == ["a"]
    assert window.answer("a", "DEADLINE")
    assert not window.answer("a", "late answer from the router")
    assert window.take() == [("a", "DEADLINE"), ("b", "B")]
    assert window.next_deadline() is None


def test_unknown_and_duplicate_ids() -> None:
    window = opened("a", ordered=True)
    assert not window.answer("zzz", "?")
    with pytest.raises(ValueError, match="already outstanding"):
        window.open("a", deadline=1.0)


def test_a_none_result_is_still_an_answer() -> None:
    window: ChatWindow[None] = ChatWindow(capacity=2, ordered=True)
    window.open("a", deadline=1.0)
    window.answer("a", None)
    assert window.take() == [("a", None)]
