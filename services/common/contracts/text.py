"""The text modality's tensor contract: what the text service serves and the router reads.

* input `TEXT` BYTES [N, 1]: UTF-8 text.
* output `TOXICITY` FP32 [N, 1]: P(toxic), `toxicity_en` (English); read as category `hate`.
* output `SPAM` FP32 [N, 1]: P(spam), `spam_en` (English, SMS-like); category `spam`.
* output `MATCHES` BYTES [N, 1]: UTF-8 JSON list of blocklist hits, each
  `{"category", "term", "severity", "start", "end", "text", "source"}`, where start/end are half-open
  code-point offsets into the text exactly as sent and `term` is the normalised lexicon term.

Example::

    row = {"TOXICITY": np.array([0.9], np.float32), "SPAM": np.array([0.0], np.float32), "MATCHES": np.array([b"[]"], object)}
    decode_row(row).scores   # {"hate": 0.9, "spam": 0.0}
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from services.common.contracts.rows import MalformedRowError, row_float, row_json
from services.common.contracts.tensors import TensorSpec

MODEL_NAME = "text_moderation"
INPUT = TensorSpec("TEXT", "BYTES", (1,))
#: Score outputs and the taxonomy category each one feeds.
SCORE_OUTPUTS: Mapping[str, str] = {"TOXICITY": "hate", "SPAM": "spam"}
MATCHES = "MATCHES"
OUTPUTS: tuple[TensorSpec, ...] = (*(TensorSpec(name, "FP32", (1,)) for name in SCORE_OUTPUTS),
                                   TensorSpec(MATCHES, "BYTES", (1,)))
#: What the router asks for (everything here).
ROUTER_OUTPUTS: tuple[str, ...] = tuple(spec.name for spec in OUTPUTS)


@dataclass(frozen=True)
class LexiconHit:
    """One blocklist hit: half-open code-point offsets into the text exactly as sent."""

    category: str
    term: str
    severity: int
    start: int
    end: int
    text: str
    source: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"category": self.category, "term": self.term, "severity": self.severity, "start": self.start,
                "end": self.end, "text": self.text, "source": self.source}


@dataclass(frozen=True)
class TextRow:
    """One text's answer: category scores and blocklist hits."""

    scores: dict[str, float]
    matches: tuple[LexiconHit, ...]


def encode_matches(hits: Sequence[Mapping[str, Any]]) -> bytes:
    """The MATCHES value for one text (the model side)."""
    return json.dumps(list(hits), ensure_ascii=False).encode("utf-8")


def decode_row(row: Mapping[str, np.ndarray]) -> TextRow:
    """A typed TextRow from one response row; MalformedRowError if it breaks the contract."""
    scores = {category: row_float(row, name) for name, category in SCORE_OUTPUTS.items()}
    raw = row_json(row, MATCHES)
    if not isinstance(raw, list):
        raise MalformedRowError(f"output {MATCHES!r} must be a JSON list")
    try:
        hits = tuple(LexiconHit(str(m["category"]), str(m["term"]), int(m["severity"]), int(m["start"]), int(m["end"]),
                                str(m["text"]), str(m.get("source", ""))) for m in raw)
    except (KeyError, TypeError, ValueError) as error:
        raise MalformedRowError(f"output {MATCHES!r} has a malformed hit ({error!r})") from None
    return TextRow(scores, hits)
