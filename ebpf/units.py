"""Rates in tc's notation: `parse_rate("1gbit") == 1_000_000_000` (bits per second).

Suffixes follow tc(8): a bare number or `bit` is bits per second, `kbit`/`mbit`/`gbit`/`tbit` are
powers of 1000, `kibit`/`mibit`/`gibit` powers of 1024, and `bps`/`kbps`/`mbps`/`gbps` are bytes
per second.
"""

from __future__ import annotations

import re

_UNITS = {
    "": 1, "bit": 1, "kbit": 10**3, "mbit": 10**6, "gbit": 10**9, "tbit": 10**12,
    "kibit": 2**10, "mibit": 2**20, "gibit": 2**30, "tibit": 2**40,
    "bps": 8, "kbps": 8 * 10**3, "mbps": 8 * 10**6, "gbps": 8 * 10**9, "tbps": 8 * 10**12,
}
_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$")


def parse_rate(text: str) -> int:
    """Bits per second for a tc rate such as `20mbit` or `1gbit`; ValueError naming the text otherwise.

    >>> parse_rate("2.5mbit")
    2500000
    """
    match = _RATE.match(text.lower())
    if match is None or match.group(2) not in _UNITS:
        raise ValueError(f"rate must be a number with a tc unit (bit, kbit, mbit, gbit, bps, ...), got {text!r}")
    bits = round(float(match.group(1)) * _UNITS[match.group(2)])
    if bits <= 0:
        raise ValueError(f"rate must be positive, got {text!r}")
    return bits


def format_rate(bits_per_second: int) -> str:
    """The shortest exact tc spelling: `format_rate(20_000_000) == "20mbit"`."""
    for suffix, scale in (("gbit", 10**9), ("mbit", 10**6), ("kbit", 10**3)):
        if bits_per_second % scale == 0:
            return f"{bits_per_second // scale}{suffix}"
    return f"{bits_per_second}bit"
