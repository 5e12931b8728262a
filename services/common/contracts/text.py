"""The text modality's tensor contract v3: what both text models serve and the router reads.

Two served models share it: `text_moderation` (profile fast: normalisation, lexicon + context rules,
linear heads over cheap features) and `text_semantic` (profile accurate: the same plus a MiniLM-L6
sentence embedding and heads over [embedding, cheap scores]).

* input `TEXT` BYTES [N, 1]: UTF-8 text.
* score outputs FP32 [N, 1], one per category (`SCORE_OUTPUTS`): HARASSMENT, HATE, VIOLENCE,
  SELF_HARM, SEXUAL, PROFANITY, SPAM. Each is a probability calibrated on the corpus dev split, so one
  policy threshold means the same thing for both models.
* `MATCHES` BYTES [N, 1]: UTF-8 JSON list of hits, each `{"category", "term", "severity", "start",
  "end", "text", "source"}` plus an optional `"max_action": "review"` (an ambiguous-tier entry that
  alone may at most REVIEW). Lexicon hits carry the lexicon source; context-rule hits carry
  `"source": "rule:<id>"`. start/end are half-open code-point offsets into the text exactly as sent;
  `term` is the normalised lexicon term (or the rule's matched words).
* `EVIDENCE` BYTES [N, 1]: UTF-8 JSON list of `{"category", "start", "end", "score", "source"}`: the
  span(s) that drove each category's score (same offsets as MATCHES).
* `TARGET` FP32 [N, 1]: 1.0 when the text addresses a person (second person / named person) or names a
  protected group, else 0.0.
* subcategory outputs FP32 [N, 1], one per taxonomy subcategory (`SUBCATEGORY_OUTPUTS`: SELF_HARM_INTENT,
  ..., SEXUAL_MINORS): the share of that kind, the probability that the text is of this kind *if* it is
  content of the parent category (not how likely it is parent content: that is the parent's score).
  0 where the model does not tell kinds apart (a text the English heads do not read). v3 added these.

Example::

    row = decode_row({**{name: np.array([0.0], np.float32) for name in SCORE_OUTPUTS},
                      "MATCHES": np.array([b"[]"], object), "EVIDENCE": np.array([b"[]"], object),
                      "TARGET": np.array([1.0], np.float32)})
    row.scores["harassment"], row.target   # (0.0, True)
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from services.common.contracts.rows import MalformedRowError, row_float, row_json
from services.common.contracts.tensors import TensorSpec
from services.common.taxonomy import SUBCATEGORIES

__all__ = ["CATEGORIES", "EVIDENCE", "EvidenceSpan", "INPUT", "LexiconHit", "MATCHES", "MAX_ACTIONS", "MODEL_NAME",
           "MODEL_NAMES", "OUTPUTS", "ROUTER_OUTPUTS", "SCORE_OUTPUTS", "SEMANTIC_MODEL_NAME", "SUBCATEGORY_OUTPUTS", "TARGET", "TextRow",
           "decode_row", "encode_evidence", "encode_matches"]

#: The fast model (profile fast; balanced asks it first).
MODEL_NAME = "text_moderation"
#: The semantic model (profile accurate; balanced asks it for uncertain or targeted texts).
SEMANTIC_MODEL_NAME = "text_semantic"
MODEL_NAMES: tuple[str, ...] = (MODEL_NAME, SEMANTIC_MODEL_NAME)
INPUT = TensorSpec("TEXT", "BYTES", (1,))
#: Score outputs and the taxonomy category each one feeds (same order as the heads' columns).
SCORE_OUTPUTS: Mapping[str, str] = {"HARASSMENT": "harassment", "HATE": "hate", "VIOLENCE": "violence",
                                    "SELF_HARM": "self_harm", "SEXUAL": "sexual", "PROFANITY": "profanity",
                                    "SPAM": "spam"}
CATEGORIES: tuple[str, ...] = tuple(SCORE_OUTPUTS.values())
#: Subcategory share outputs and the taxonomy subcategory each one feeds (taxonomy order).
SUBCATEGORY_OUTPUTS: Mapping[str, str] = {name.upper().replace("/", "_"): name for name in SUBCATEGORIES}
MATCHES = "MATCHES"
EVIDENCE = "EVIDENCE"
TARGET = "TARGET"
#: The only value a hit's optional `max_action` may take.
MAX_ACTIONS = ("review",)
OUTPUTS: tuple[TensorSpec, ...] = (*(TensorSpec(name, "FP32", (1,)) for name in SCORE_OUTPUTS),
                                   TensorSpec(MATCHES, "BYTES", (1,)), TensorSpec(EVIDENCE, "BYTES", (1,)),
                                   TensorSpec(TARGET, "FP32", (1,)),
                                   *(TensorSpec(name, "FP32", (1,)) for name in SUBCATEGORY_OUTPUTS))
#: What the router asks for (everything here).
ROUTER_OUTPUTS: tuple[str, ...] = tuple(spec.name for spec in OUTPUTS)


@dataclass(frozen=True)
class LexiconHit:
    """One blocklist or rule hit: half-open code-point offsets into the text exactly as sent.

    `max_action` is "review" for an ambiguous-tier entry that alone may at most REVIEW, else None.
    The router's fusion takes hits in this same record (`fusion.BlockMatch`), `source` relabelled
    with the lexicon they count for (`default`, `policy:<name>`) or kept as `rule:<id>`.
    """

    category: str
    term: str
    severity: int
    start: int
    end: int
    text: str
    source: str = ""
    max_action: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The hit as MATCHES encodes it (`max_action` only when set)."""
        out: dict[str, Any] = {"category": self.category, "term": self.term, "severity": self.severity,
                               "start": self.start, "end": self.end, "text": self.text, "source": self.source}
        if self.max_action is not None:
            out["max_action"] = self.max_action
        return out


@dataclass(frozen=True)
class EvidenceSpan:
    """A span that drove a category's score: `source` says what found it (e.g. `rule:threat_you`,
    `lexicon`, `head:sentence`)."""

    category: str
    start: int
    end: int
    score: float
    source: str

    def to_json(self) -> dict[str, Any]:
        """The span as EVIDENCE encodes it."""
        return {"category": self.category, "start": self.start, "end": self.end, "score": round(self.score, 6),
                "source": self.source}


@dataclass(frozen=True)
class TextRow:
    """One text's answer: category scores, hits, evidence spans, whether it has a person/group target, and
    the share of each subcategory (taxonomy name -> 0..1)."""

    scores: dict[str, float]
    matches: tuple[LexiconHit, ...]
    evidence: tuple[EvidenceSpan, ...] = ()
    target: bool = False
    subcategories: Mapping[str, float] = field(default_factory=dict)


def encode_matches(hits: Sequence[Mapping[str, Any]]) -> bytes:
    """The MATCHES value for one text (the model side)."""
    return json.dumps(list(hits), ensure_ascii=False).encode("utf-8")


def encode_evidence(spans: Sequence[EvidenceSpan]) -> bytes:
    """The EVIDENCE value for one text (the model side)."""
    return json.dumps([span.to_json() for span in spans], ensure_ascii=False).encode("utf-8")


def decode_row(row: Mapping[str, np.ndarray]) -> TextRow:
    """A typed TextRow from one response row; MalformedRowError if it breaks the contract."""
    scores = {category: row_float(row, name) for name, category in SCORE_OUTPUTS.items()}
    shares = {sub: row_float(row, name) for name, sub in SUBCATEGORY_OUTPUTS.items()}
    return TextRow(scores, _decode_matches(row), _decode_evidence(row), row_float(row, TARGET) >= 0.5, shares)


def _json_list(row: Mapping[str, np.ndarray], name: str) -> list[Any]:
    raw = row_json(row, name)
    if not isinstance(raw, list):
        raise MalformedRowError(f"output {name!r} must be a JSON list")
    return raw


def _decode_matches(row: Mapping[str, np.ndarray]) -> tuple[LexiconHit, ...]:
    try:
        hits = tuple(LexiconHit(str(m["category"]), str(m["term"]), int(m["severity"]), int(m["start"]),
                                int(m["end"]), str(m["text"]), str(m.get("source", "")), _max_action(m))
                     for m in _json_list(row, MATCHES))
    except (KeyError, TypeError, ValueError) as error:
        raise MalformedRowError(f"output {MATCHES!r} has a malformed hit ({error!r})") from None
    return hits


def _max_action(hit: Mapping[str, Any]) -> str | None:
    value = hit.get("max_action")
    if value is not None and value not in MAX_ACTIONS:
        raise ValueError(f"max_action {value!r} is not one of {MAX_ACTIONS}")
    return None if value is None else str(value)


def _decode_evidence(row: Mapping[str, np.ndarray]) -> tuple[EvidenceSpan, ...]:
    try:
        spans = tuple(EvidenceSpan(str(e["category"]), int(e["start"]), int(e["end"]), float(e["score"]),
                                   str(e["source"])) for e in _json_list(row, EVIDENCE))
    except (KeyError, TypeError, ValueError) as error:
        raise MalformedRowError(f"output {EVIDENCE!r} has a malformed span ({error!r})") from None
    return spans
