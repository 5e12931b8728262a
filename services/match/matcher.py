"""Which banks an item matches, and what each match means (issue 42). Pure: signals and loaded banks in,
matches out.

For each bank the tenant may see (its own, and shared ones; never another tenant's private bank):

1. the bank's `enabled_ratio`: a bank enabled for part of the content (a gradual roll-out, as HMA's
   matching_enabled_ratio) matches an item only when the item's content hash falls in that share;
2. exact signals: the image's MD5 or SHA-256, the text's canonical SHA-256 (distance 0); a file (an
   animation as sent) has only these, its MD5 and SHA-256;
3. perceptual signals: PDQ within the bank's `pdq_distance` (each of the query's hashes: the image as sent
   and, when the service queries them, its rotations and flips), only when the image's PDQ quality reaches
   the bank's `min_pdq_quality` (a flat image's hash matches everything); the text SimHash within the
   bank's `text_distance`.

A text whose canonical form says too little (under 10 letters or digits besides link placeholders: every
link-only message is "url") is never matched. One match per bank: its closest signal. A match in a `negative` bank (known-benign content) marks every
other bank's match of the item `suppressed`: reported, never acting.

Example::

    matches = match_text(banks.visible_to("acme"), text_signals("free crypto airdrop, claim now"))
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

import numpy as np

from services.common.contracts.match import Match
from services.match.banks import LoadedBank
from services.match.signals import ImageSignals, TextSignals, matchable

__all__ = ["enabled_for", "match_file", "match_image", "match_text"]


def enabled_for(content_sha256: str, ratio: float) -> bool:
    """Whether a bank enabled for `ratio` of the content matches the content whose SHA-256 (hex) is given:
    the same content is always in or out.

    Example::

        >>> enabled_for("00" * 32, 0.01), enabled_for("ff" * 32, 0.99), enabled_for("ff" * 32, 1.0)
        (True, False, True)
    """
    return ratio >= 1.0 or int(content_sha256[:16], 16) / 2.0 ** 64 < ratio


def match_image(banks: Sequence[LoadedBank], signals: ImageSignals) -> list[Match]:
    """The matches of an image's signals in `banks` (see the module docstring)."""
    queries = np.frombuffer(b"".join(signals.pdq), dtype=np.uint8).reshape(len(signals.pdq), 32)
    found = []
    for bank in banks:
        if not enabled_for(signals.sha256, bank.spec.enabled_ratio):
            continue
        best: tuple[int, str, str] | None = None
        for signal, value in (("sha256", signals.sha256), ("md5", signals.md5)):
            if (signal, value) in bank.exact:
                best = (0, signal, bank.exact[(signal, value)])
                break
        if best is None and len(bank.pdq) and signals.quality >= bank.spec.min_pdq_quality:
            hits = [hit for per_query in bank.pdq.query(queries, bank.spec.pdq_distance) for hit in per_query]
            if hits:
                content_id, distance = min(hits, key=lambda hit: hit[1])
                best = (distance, "pdq", content_id)
        if best is not None:
            found.append(_match(bank, *best))
    return _suppressed(found, banks)


def match_file(banks: Sequence[LoadedBank], md5: str, sha256: str) -> list[Match]:
    """The exact matches of a file's bytes (MD5, SHA-256 hex) in `banks`: an animation's file as sent, whose
    frames are matched as still images besides."""
    found = []
    for bank in banks:
        if not enabled_for(sha256, bank.spec.enabled_ratio):
            continue
        for signal, value in (("sha256", sha256), ("md5", md5)):
            if (signal, value) in bank.exact:
                found.append(_match(bank, 0, signal, bank.exact[(signal, value)]))
                break
    return _suppressed(found, banks)


def match_text(banks: Sequence[LoadedBank], signals: TextSignals) -> list[Match]:
    """The matches of a text's signals in `banks` (see the module docstring)."""
    query = np.frombuffer(signals.simhash, dtype=np.uint8).reshape(1, 32)
    found = []
    for bank in banks:
        if not matchable(signals.canonical) or not enabled_for(signals.sha256, bank.spec.enabled_ratio):
            continue
        best: tuple[int, str, str] | None = None
        if ("text_sha256", signals.sha256) in bank.exact:
            best = (0, "text_sha256", bank.exact[("text_sha256", signals.sha256)])
        elif len(bank.text):
            hits = bank.text.query(query, bank.spec.text_distance)[0]
            if hits:
                best = (hits[0][1], "text_simhash", hits[0][0])
        if best is not None:
            found.append(_match(bank, *best))
    return _suppressed(found, banks)


def _match(bank: LoadedBank, distance: int, signal: str, content_id: str) -> Match:
    spec = bank.spec
    return Match(spec.name, bank.version, signal, distance, content_id, spec.category, spec.severity, spec.action,
                 negative=spec.negative)


def _suppressed(found: list[Match], banks: Sequence[LoadedBank]) -> list[Match]:
    """Mark the matches a negative (known-benign) match suppresses: a shared negative bank's, every other
    match; a tenant's own negative bank's, only that tenant's banks' matches (a tenant cannot switch off a
    shared list, such as a platform's mandatory one, for its content)."""
    shared = {bank.spec.name for bank in banks if bank.spec.shared}
    negatives = [m for m in found if m.negative]
    if not negatives:
        return found
    if any(m.bank in shared for m in negatives):
        return [m if m.negative else replace(m, suppressed=True) for m in found]
    return [m if m.negative or m.bank in shared else replace(m, suppressed=True) for m in found]
