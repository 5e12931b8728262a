"""Subcategories through the real router and text service (real models, default policy): the kind of
content that fired a category decides its action and is named in the response (docs/taxonomy.md)."""

from __future__ import annotations

from auditmesh.v1 import moderation_pb2 as pb
from auditmesh.v1 import moderation_pb2_grpc as pb_grpc

from tests.stubs import moderate


def category(response: pb.ModerateResponse, name: str) -> pb.CategoryResult:
    return next(c for c in response.categories if c.category == name)


def shares(result: pb.CategoryResult) -> dict[str, float]:
    return {s.name: s.share for s in result.subcategories}


def test_someone_in_crisis_is_reviewed_not_blocked_and_the_response_says_self_harm_intent(
        stub: pb_grpc.ModerationServiceStub) -> None:
    text = ("i cant keep doing this. i wrote letters to my mum and my brother tonight and i have the pills "
            "counted out. i just want it to stop")
    response = moderate(stub, text)
    self_harm = category(response, "self_harm")
    assert (response.decision, self_harm.action, self_harm.subcategory) == (pb.REVIEW, pb.REVIEW, "self_harm/intent"), \
        response
    assert "subcategories.self_harm/intent.action=review" in self_harm.rule
    assert set(shares(self_harm)) == {"self_harm/intent", "self_harm/instructions", "self_harm/encouragement"}
    assert shares(self_harm)["self_harm/intent"] >= 0.5


def test_telling_someone_to_kill_themselves_blocks_as_encouragement(stub: pb_grpc.ModerationServiceStub) -> None:
    response = moderate(stub, "nobody in this server would even notice if you were gone. do everyone a favour and kys")
    self_harm = category(response, "self_harm")
    assert (response.decision, self_harm.action, self_harm.subcategory) == \
        (pb.BLOCK, pb.BLOCK, "self_harm/encouragement"), response


def test_a_threat_blocks_as_violence_threat(stub: pb_grpc.ModerationServiceStub) -> None:
    response = moderate(stub, "keep talking. i know which gym you go to and next time you walk out to your car "
                              "i'm going to break both your legs")
    violence = category(response, "violence")
    assert (response.decision, violence.action, violence.subcategory) == (pb.BLOCK, pb.BLOCK, "violence/threat"), \
        response


def test_a_gory_description_is_reviewed_as_violence_graphic(stub: pb_grpc.ModerationServiceStub) -> None:
    response = moderate(stub, "the video shows the guy's face after the machete hit him, half his jaw hanging off "
                              "and blood pumping out of his neck onto the floor while he twitches")
    violence = category(response, "violence")
    assert (violence.action, violence.subcategory) == (pb.REVIEW, "violence/graphic"), response
    assert response.decision == pb.REVIEW


def test_sexual_content_about_a_minor_blocks_as_sexual_minors_with_the_reference_as_evidence(
        stub: pb_grpc.ModerationServiceStub) -> None:
    text = "any 13f here wanna sext? send me nudes and ill send mine"
    response = moderate(stub, text)
    sexual = category(response, "sexual")
    assert (response.decision, sexual.action, sexual.subcategory) == (pb.BLOCK, pb.BLOCK, "sexual/minors"), response
    spans = [e.text_span for e in response.evidence if e.category == "sexual/minors"]
    assert [s.text for s in spans] == ["13"] and spans[0].lexicon == "minor_reference"
    adult = moderate(stub, "any 30f here wanna sext? send me nudes and ill send mine")
    assert category(adult, "sexual").subcategory == ""


def test_harassment_that_threatens_blocks_as_harassment_threatening(stub: pb_grpc.ModerationServiceStub) -> None:
    response = moderate(stub, "you pathetic little creep, keep posting my pics and i'll find out where you live "
                              "and make you regret it")
    harassment = category(response, "harassment")
    assert (response.decision, harassment.action, harassment.subcategory) == \
        (pb.BLOCK, pb.BLOCK, "harassment/threatening"), response
