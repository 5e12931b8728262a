"""Turning the router's pure results into `auditmesh.v1` messages, and requests into plain values."""

from __future__ import annotations

from auditmesh.v1 import moderation_pb2 as pb

from services.common.status import bounded, status_with_retry

from services.router.fusion import Evidence, ImageScoreEvidence, MatchEvidence, OcrLineEvidence, TextSpanEvidence, Verdict
from services.router.pipeline import Outcome
from services.router.validation import RawPart

DECISIONS = {"allow": pb.ALLOW, "review": pb.REVIEW, "block": pb.BLOCK}
SEVERITIES = {"none": pb.SEVERITY_NONE, "low": pb.SEVERITY_LOW, "medium": pb.SEVERITY_MEDIUM, "high": pb.SEVERITY_HIGH}


def raw_parts(item: pb.Item) -> list[RawPart]:
    """The parts of a request item as plain values for validation."""
    parts = []
    for part in item.parts:
        kind = part.WhichOneof("content")
        parts.append(RawPart(part.text if kind == "text" else None, part.image.data if kind == "image" else None))
    return parts


def response_for(request_id: str, item_id: str, policy_name: str, policy_version: str, outcome: Outcome,
                 total_ms: float) -> pb.ModerateResponse:
    """A ModerateResponse for a finished item."""
    verdict = outcome.verdict
    response = pb.ModerateResponse(request_id=request_id, item_id=item_id, decision=DECISIONS[verdict.decision],
                                   policy_name=policy_name, policy_version=policy_version,
                                   degraded=bool(verdict.degradations), cached=outcome.cached,
                                   short_circuited=outcome.short_circuited)
    for category in verdict.categories:
        entry = response.categories.add(category=category.category, score=category.score,
                                        severity=SEVERITIES[category.severity], action=DECISIONS[category.action],
                                        rule=category.rule, subcategory=category.subcategory)
        for name, share in category.shares.items():
            entry.subcategories.add(name=name, share=share)
    _add_evidence(response, verdict)
    for name, version in outcome.models:
        response.models.add(name=name, version=version)
    for degradation in verdict.degradations:
        response.degradations.add(stage=degradation.stage, reason=bounded(degradation.reason),
                                  handling=degradation.handling)
    for stage, ms in sorted(outcome.timings_ms.items()):
        response.timings.add(stage=stage, duration_ms=round(ms, 3))
    response.timings.add(stage="total", duration_ms=round(total_ms, 3))
    return response


def _add_evidence(response: pb.ModerateResponse, verdict: Verdict) -> None:
    response.evidence.extend(evidence_message(evidence) for evidence in verdict.evidence)


def evidence_message(evidence: Evidence) -> pb.Evidence:
    """The proto form of one piece of evidence (a response's, or an audit record's)."""
    entry = pb.Evidence(category=evidence.category, part_index=evidence.part_index, frame_index=evidence.frame)
    if isinstance(evidence, TextSpanEvidence):
        entry.text_span.CopyFrom(pb.TextSpan(start=evidence.start, end=evidence.end, text=evidence.text,
                                             matched_term=evidence.matched_term, lexicon=evidence.lexicon,
                                             from_ocr=evidence.ocr_line >= 0, ocr_line_index=evidence.ocr_line,
                                             score=evidence.score))
    elif isinstance(evidence, OcrLineEvidence):
        line = evidence.line
        entry.ocr_line.CopyFrom(pb.OcrLine(line_index=line.line_index, text=line.text, confidence=line.confidence,
                                           polygon=[pb.Point(x=x, y=y) for x, y in line.polygon]))
    elif isinstance(evidence, ImageScoreEvidence):
        entry.image_score.CopyFrom(pb.ImageScore(model=evidence.model, scores=dict(evidence.scores)))
    elif isinstance(evidence, MatchEvidence):
        entry.match.CopyFrom(pb.MatchEvidence(bank=evidence.bank, bank_version=evidence.bank_version,
                                              signal_type=evidence.signal_type, distance=evidence.distance,
                                              content_id=evidence.content_id))
    return entry




def error_response(request_id: str, item_id: str, code: int, message: str,
                   retry_after_s: float | None = None) -> pb.ModerateResponse:
    """A per-item error (ModerateBatch / ModerateStream); `code` is the numeric gRPC status code."""
    return pb.ModerateResponse(request_id=request_id, item_id=item_id,
                               error=status_with_retry(code, bounded(message), retry_after_s))
