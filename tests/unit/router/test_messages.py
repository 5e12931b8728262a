"""The one converter between the router's results and auditmesh.v1 messages (responses and audit)."""

from __future__ import annotations

from auditmesh.v1 import moderation_pb2 as pb
from google.rpc import error_details_pb2

from services.router.fusion import (CategoryVerdict, Degradation, ImageScoreEvidence, OcrLineEvidence, OcrLineFinding,
                                    TextSpanEvidence, Verdict)
from services.router.messages import error_response, evidence_message, raw_parts, response_for
from services.router.pipeline import Outcome


def test_each_evidence_kind_converts() -> None:
    span = evidence_message(TextSpanEvidence("hate", 0, 4, 9, "idiot", "idiot", "default", 2, 0.75))
    assert span.WhichOneof("kind") == "text_span" and span.category == "hate"
    assert (span.text_span.start, span.text_span.end, span.text_span.ocr_line_index) == (4, 9, 2)
    assert span.text_span.from_ocr and span.text_span.matched_term == "idiot"
    line = evidence_message(OcrLineEvidence("hate", 1, OcrLineFinding(1, 3, "a sign", 0.5, ((0, 0), (4, 0), (4, 2), (0, 2)))))
    assert line.ocr_line.line_index == 3 and [(p.x, p.y) for p in line.ocr_line.polygon][2] == (4, 2)
    image = evidence_message(ImageScoreEvidence("sexual", 2, "opennsfw", {"sexual": 0.5}))
    assert image.part_index == 2 and dict(image.image_score.scores) == {"sexual": 0.5}


def test_response_carries_verdict_models_degradations_and_timings() -> None:
    verdict = Verdict("review", [CategoryVerdict("spam", 0.6, "medium", "review", "threshold")],
                      [TextSpanEvidence("spam", 0, 0, 4, "free", "", "", -1, 0.6)],
                      [Degradation("vision", "unavailable", "fail_open")])
    outcome = Outcome(verdict, {"text": 1.5}, [("text_moderation", "1")])
    response = response_for("r1", "i1", "default", "v2", outcome, 3.25)
    assert response.decision == pb.REVIEW and response.degraded and response.policy_version == "v2"
    assert [(c.category, c.action, c.severity) for c in response.categories] == [("spam", pb.REVIEW, pb.SEVERITY_MEDIUM)]
    assert [(m.name, m.version) for m in response.models] == [("text_moderation", "1")]
    assert [(t.stage, t.duration_ms) for t in response.timings] == [("text", 1.5), ("total", 3.25)]
    assert response.evidence[0].text_span.text == "free"


def test_error_response_carries_retry_info_only_with_a_hint() -> None:
    plain = error_response("r1", "i1", 3, "bad")
    assert plain.error.code == 3 and not plain.error.details
    hinted = error_response("r1", "i1", 8, "slow down", 0.25)
    info = error_details_pb2.RetryInfo()
    assert hinted.error.details[0].Unpack(info) and info.retry_delay.ToNanoseconds() == 250_000_000


def test_raw_parts_keep_order_and_kind() -> None:
    item = pb.Item(id="x", parts=[pb.Part(text="hi"), pb.Part(image=pb.Image(data=b"\x89PNG"))])
    parts = raw_parts(item)
    assert [(p.text, p.image) for p in parts] == [("hi", None), (None, b"\x89PNG")]
