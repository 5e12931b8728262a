"""Tensor contract of the known-content matching service (`services/match/`, issue 42), declared once.

Model `match`:

* input `ITEM`: BYTES [N, 1]. Each value is one item in an envelope: a JSON header line
  `{"tenant": "...", "kind": "text" | "image" | "file"}`, a newline, then the content itself (UTF-8 text,
  the image's bytes as sent, or, for `file`, a file matched only by its exact hashes, MD5 and SHA-256, and
  never decoded: the router sends an animation's file so, besides a still image of each kept frame). One input, so the router's dispatcher and a Triton server send it like any
  other modality's; the tenant is the router's authenticated tenant (the service matches its private
  banks and the shared ones, never another tenant's).
* output `MATCHES`: BYTES [N, 1], per item a JSON list of matches (`encode_matches`), empty when nothing
  matched;
* output `ERROR`: BYTES [N, 1], "" or why the item could not be hashed (an undecodable image).

Example::

    >>> envelope = encode_item("acme", "text", "free airdrop".encode())
    >>> decode_item(envelope)
    ('acme', 'text', b'free airdrop')
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Literal, Mapping, Sequence

import numpy as np

from services.common.contracts.rows import MalformedRowError, row_json, row_text
from services.common.contracts.tensors import TensorSpec

__all__ = ["ERROR", "INPUT", "KINDS", "Kind", "MATCHES", "MODEL_NAME", "Match", "OUTPUTS", "ROUTER_OUTPUTS", "decode_item",
           "decode_row", "encode_item", "encode_matches"]

MODEL_NAME = "match"
INPUT = TensorSpec("ITEM", "BYTES", (1,))
MATCHES = "MATCHES"
ERROR = "ERROR"
OUTPUTS = (TensorSpec(MATCHES, "BYTES", (1,)), TensorSpec(ERROR, "BYTES", (1,)))
ROUTER_OUTPUTS: tuple[str, ...] = (MATCHES, ERROR)
Kind = Literal["text", "image", "file"]
KINDS: tuple[Kind, ...] = ("text", "image", "file")
#: The envelope's header is at most this long (the content after it is bounded by the service's limits).
MAX_HEADER_BYTES = 256


@dataclass(frozen=True)
class Match:
    """One bank's match of an item: which bank (at which version), by which signal, how close, the content
    it matched, and what the bank says it means. `suppressed`: a negative bank also matched the item."""

    bank: str
    bank_version: int
    signal_type: str
    distance: int
    content_id: str
    category: str
    severity: str
    action: str
    negative: bool = False
    suppressed: bool = False


def encode_item(tenant: str, kind: Kind, content: bytes) -> bytes:
    """One `ITEM` value."""
    return json.dumps({"tenant": tenant, "kind": kind}, separators=(",", ":")).encode("utf-8") + b"\n" + content


def decode_item(value: bytes) -> tuple[str, Kind, bytes]:
    """(tenant, kind, content) of one `ITEM` value; ValueError naming what is wrong."""
    header, newline, content = bytes(value[:MAX_HEADER_BYTES + 1]).partition(b"\n")
    if not newline:
        raise ValueError(f"ITEM: no header line (a JSON object and a newline in the first {MAX_HEADER_BYTES} bytes)")
    try:
        fields = json.loads(header.decode("utf-8"))
        tenant, kind = fields["tenant"], fields["kind"]
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError(f"ITEM: the header is not {{\"tenant\": ..., \"kind\": ...}} ({error})") from None
    if not isinstance(tenant, str) or not tenant or kind not in KINDS:
        raise ValueError("ITEM: the header needs a tenant and a kind of 'text', 'image' or 'file'")
    return tenant, kind, bytes(value[len(header) + 1:])


def encode_matches(matches: Sequence[Match]) -> bytes:
    """One `MATCHES` value."""
    return json.dumps([asdict(m) for m in matches], separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def decode_row(row: Mapping[str, np.ndarray]) -> tuple[list[Match], str]:
    """(matches, error) of one response row; MalformedRowError when it breaks the contract."""
    raw = row_json(row, MATCHES)
    if not isinstance(raw, list):
        raise MalformedRowError(f"output {MATCHES!r} must be a JSON list")
    try:
        matches = [Match(**entry) for entry in raw]
    except TypeError as error:
        raise MalformedRowError(f"output {MATCHES!r} has a malformed match ({error})") from None
    return matches, row_text(row, ERROR)
