from __future__ import annotations

import pytest

from ebpf.units import format_rate, parse_rate


@pytest.mark.parametrize("text, bits", [("1gbit", 10**9), ("20mbit", 20 * 10**6), ("2.5mbit", 2_500_000),
                                        ("500kbit", 500_000), ("1000", 1000), ("1mibit", 2**20), ("1mbps", 8 * 10**6),
                                        (" 20Mbit ", 20 * 10**6)])
def test_parse_rate(text: str, bits: int) -> None:
    assert parse_rate(text) == bits


@pytest.mark.parametrize("text", ["", "fast", "10 furlongs", "0mbit", "-1mbit"])
def test_parse_rate_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="rate"):
        parse_rate(text)


@pytest.mark.parametrize("bits, text", [(10**9, "1gbit"), (16 * 10**6, "16mbit"), (8000, "8kbit"), (1234, "1234bit")])
def test_format_rate_round_trips(bits: int, text: str) -> None:
    assert format_rate(bits) == text
    assert parse_rate(text) == bits
