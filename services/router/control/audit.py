"""Decision audit records: what the router decided for one item, and why, without the content. Pure.

A record holds the request and item ids, the tenant, the time, the decision, every category with its
score, action and rule, the policy name and version that decided, the model versions that scored,
whether it was degraded, the canary arm, the item's client metadata, and references to the evidence
(part index, offsets, lexicon and term, OCR line index and box, image scores). Span and OCR-line
text, and the text parts themselves, are kept only when the policy sets `audit.include_content`.
Stored by `services.router.control.audit_store`.

Categories follow the taxonomy (services/common/taxonomy.py); each record says which (`taxonomy`) and
the accuracy profile its texts were judged with (`profile`). A stored record without `taxonomy` was
written under taxonomy 1, where `hate` was the generic toxicity score; it still reads back unchanged
(docs/taxonomy.md, "Migration").

Example::

    record = audit_record(AuditInput(tenant="acme", request_id="r1", item_id="c-9", metadata={},
                                     texts=["..."], policy=policy, verdict=verdict, models=[...]), now=time.time())
    record.evidence[0]   # TextSpanEvidence(category="profanity", part_index=0, start=3, end=8, text="", ...)

Evidence is kept typed (the router's own `services.router.fusion` evidence records, with their text
blanked unless content is kept), so the admin API converts it with the same code as a response
(`services.router.messages.evidence_message`). It is stored as JSON (`evidence_reference`, read back
with `evidence_from_reference`).
"""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence

from services.router.fusion import (Evidence, ImageScoreEvidence, MatchEvidence, OcrLineEvidence, OcrLineFinding, TextSpanEvidence,
                                    Verdict)
from services.router.policy import CompiledPolicy

#: The taxonomy new records are written under (1 = before issue 13: one generic `hate` text score).
TAXONOMY_VERSION = 2


@dataclass(frozen=True)
class AuditCategory:
    category: str
    score: float
    action: str
    rule: str
    #: The kind that decided the action ("" when none; records stored before subcategories have none).
    subcategory: str = ""


@dataclass(frozen=True)
class AuditRecord:
    audit_id: str
    request_id: str
    item_id: str
    tenant: str
    time: float
    decision: str
    categories: tuple[AuditCategory, ...]
    policy_name: str
    policy_version: str
    models: tuple[tuple[str, str], ...]
    evidence: tuple[Evidence, ...]
    degraded: bool = False
    canary_arm: str = ""
    metadata: Mapping[str, str] = field(default_factory=dict)
    content: tuple[str, ...] = ()
    #: The decision was reused from the verdict cache (services/router/cached_pipeline.py).
    cached: bool = False
    #: Records stored before the field existed are taxonomy 1.
    taxonomy: int = 1
    #: The policy's accuracy profile (fast | balanced | accurate); "" for taxonomy-1 records.
    profile: str = ""

    def to_json_dict(self) -> dict[str, Any]:
        """Plain JSON-ready values (built by hand: `dataclasses.asdict` deep-copies, and this runs for
        every decision)."""
        return {"audit_id": self.audit_id, "request_id": self.request_id, "item_id": self.item_id,
                "tenant": self.tenant, "time": self.time, "decision": self.decision,
                "categories": [{"category": c.category, "score": c.score, "action": c.action, "rule": c.rule,
                                "subcategory": c.subcategory} for c in self.categories],
                "policy_name": self.policy_name, "policy_version": self.policy_version,
                "models": [[name, version] for name, version in self.models],
                "evidence": [evidence_reference(e) for e in self.evidence], "degraded": self.degraded,
                "canary_arm": self.canary_arm, "metadata": dict(self.metadata), "content": list(self.content),
                "taxonomy": self.taxonomy, "profile": self.profile, "cached": self.cached}

    @classmethod
    def from_json_dict(cls, data: Mapping[str, Any]) -> AuditRecord:
        """A stored record; older records (fewer keys) get the defaults, keys a newer router added are ignored."""
        known = {f.name for f in dataclasses.fields(cls)}
        values = {key: value for key, value in data.items() if key in known}
        fields = {f.name for f in dataclasses.fields(AuditCategory)}  # keys a newer router added are ignored
        values["categories"] = tuple(AuditCategory(**{k: v for k, v in c.items() if k in fields})
                                     for c in data["categories"])
        values["models"] = tuple((str(n), str(v)) for n, v in data["models"])
        values["evidence"] = tuple(evidence_from_reference(e) for e in data["evidence"])
        values["content"] = tuple(data["content"])
        return cls(**values)


@dataclass(frozen=True)
class AuditInput:
    """Everything one decision's record is made of."""

    tenant: str
    request_id: str
    item_id: str
    metadata: Mapping[str, str]
    texts: Sequence[str]
    policy: CompiledPolicy
    verdict: Verdict
    models: Sequence[tuple[str, str]]
    canary_arm: str = ""
    cached: bool = False


def audit_record(source: AuditInput, *, now: float, audit_id: str = "") -> AuditRecord:
    """The audit record of one decision (see the module docstring)."""
    verdict = source.verdict
    with_content = source.policy.document.audit.include_content
    return AuditRecord(
        audit_id=audit_id or uuid.uuid4().hex, request_id=source.request_id, item_id=source.item_id,
        tenant=source.tenant, time=now, decision=verdict.decision,
        categories=tuple(AuditCategory(c.category, round(c.score, 6), c.action, c.rule, c.subcategory)
                         for c in verdict.categories),
        policy_name=source.policy.name, policy_version=source.policy.version, models=tuple(source.models),
        evidence=tuple(e if with_content else without_content(e) for e in verdict.evidence),
        degraded=bool(verdict.degradations), canary_arm=source.canary_arm, metadata=dict(source.metadata),
        content=tuple(source.texts) if with_content else (), taxonomy=TAXONOMY_VERSION,
        profile=source.policy.profile, cached=source.cached)


def without_content(evidence: Evidence) -> Evidence:
    """`evidence` with the span or line text blanked (offsets, terms, boxes and scores stay)."""
    if isinstance(evidence, TextSpanEvidence):
        return replace(evidence, text="") if evidence.text else evidence  # replace() is slow: per item
    if isinstance(evidence, OcrLineEvidence):
        return replace(evidence, line=replace(evidence.line, text="")) if evidence.line.text else evidence
    return evidence


def evidence_reference(evidence: Evidence) -> dict[str, Any]:
    """The JSON form of one piece of evidence (text included only if the record kept it)."""
    base: dict[str, Any] = {"category": evidence.category, "part": evidence.part_index}
    if evidence.frame:  # an animation's later frame (records stay as they were for still images)
        base["frame"] = evidence.frame
    if isinstance(evidence, TextSpanEvidence):
        base.update(kind="text_span", start=evidence.start, end=evidence.end, lexicon=evidence.lexicon,
                    term=evidence.matched_term, ocr_line=evidence.ocr_line, score=round(evidence.score, 6))
        if evidence.text:
            base["text"] = evidence.text
    elif isinstance(evidence, OcrLineEvidence):
        line = evidence.line
        base.update(kind="ocr_line", line=line.line_index, confidence=round(line.confidence, 6),
                    polygon=[list(point) for point in line.polygon])
        if line.text:
            base["text"] = line.text
    elif isinstance(evidence, ImageScoreEvidence):
        base.update(kind="image_score", model=evidence.model, scores={k: round(v, 6) for k, v in evidence.scores.items()})
    elif isinstance(evidence, MatchEvidence):
        base.update(kind="match", bank=evidence.bank, bank_version=evidence.bank_version, signal=evidence.signal_type,
                    distance=evidence.distance, content_id=evidence.content_id)
    return base


def evidence_from_reference(ref: Mapping[str, Any]) -> Evidence:
    """The typed evidence of one stored JSON reference (see `evidence_reference`)."""
    category, part, frame = str(ref["category"]), int(ref["part"]), int(ref.get("frame", 0))
    kind = ref.get("kind")
    if kind == "text_span":
        return TextSpanEvidence(category, part, int(ref["start"]), int(ref["end"]), str(ref.get("text", "")),
                                str(ref["term"]), str(ref["lexicon"]), int(ref["ocr_line"]), float(ref["score"]), frame)
    if kind == "ocr_line":
        polygon = tuple((int(x), int(y)) for x, y in ref["polygon"])
        return OcrLineEvidence(category, part, OcrLineFinding(part, int(ref["line"]), str(ref.get("text", "")),
                                                              float(ref["confidence"]), polygon), frame)
    if kind == "image_score":
        return ImageScoreEvidence(category, part, str(ref["model"]), {str(k): float(v) for k, v in ref["scores"].items()},
                                  frame)
    if kind == "match":
        return MatchEvidence(category, part, str(ref["bank"]), int(ref["bank_version"]), str(ref["signal"]),
                             int(ref["distance"]), str(ref["content_id"]), frame)
    raise ValueError(f"audit evidence of unknown kind {kind!r}")
