"""The auditmesh path's requests and how its errors are grouped."""

from __future__ import annotations

from bench.payloads import BenchInputs
from bench.router_target import build_requests, error_key


def test_one_request_per_input_and_kind() -> None:
    inputs = BenchInputs((b"hello", "你好".encode()), (b"\x89PNG...",))
    requests = build_requests(inputs)
    assert [r.item.parts[0].text for r in requests["text"]] == ["hello", "你好"]
    assert requests["image"][0].item.parts[0].image.data == b"\x89PNG..."


def test_error_messages_are_grouped_without_their_numbers() -> None:
    assert error_key("DEADLINE_EXCEEDED", "shed: 12 ms left, needs 40 ms") == "DEADLINE_EXCEEDED: shed: # ms left, needs # ms"
    assert error_key("CANCELLED", None) == "CANCELLED: "
    assert len(error_key("INTERNAL", "x" * 500)) == 120
