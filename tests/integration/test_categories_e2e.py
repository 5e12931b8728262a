"""Each taxonomy-2 text category through the real router and text service, under the default policy:
one clear positive (the category fires, with a span of the text as evidence) and one hard negative
(allowed) each. The sentences are written for this test, not taken from the corpus."""

from __future__ import annotations

import pytest
from auditmesh.v1 import moderation_pb2 as pb
from auditmesh.v1 import moderation_pb2_grpc as pb_grpc

from tests.stubs import moderate

#: category -> (clear positive, hard negative that looks like it)
CASES: dict[str, tuple[str, str]] = {
    "harassment": ("You are a worthless, pathetic excuse for a person and everyone at work laughs at you.",
                   "I was such an idiot for leaving my keys in the car again, lol."),
    "hate": ("Immigrants are vermin and should be driven out of this country like the animals they are.",
             # Not "our community centre welcomes immigrants and refugees": the semantic model still scores
             # positive identity mentions as hate (0.83) -- a known error, measured per functionality
             # (hn_identity_positive) by bench/quality.py and reported in issue 13. This test checks the
             # router wiring of each category, so for hate it uses a plain benign text about a population; counter-speech
             # and positive identity mentions still fail today (see bench/quality.py).
             "The census office publishes how many people moved to the city each year."),
    "violence": ("I know where you live and I'm going to break every bone in your body tonight.",
                 "How do I kill a zombie process that won't stop on my Linux server?"),
    "self_harm": ("Do everyone a favour and cut yourself again tonight, you deserve the pain.",
                  "If you are having thoughts of self-harm, please call a crisis line; you are not alone."),
    "sexual": ("Send me nude pics right now, I want to see you naked in my bed tonight.",
               "The biology lesson covered sexual reproduction in flowering plants and pollination."),
    "profanity": ("This fucking printer jammed again, what a shitty morning.",
                  "Scunthorpe is a town in North Lincolnshire known for its steelworks."),
    "spam": ("Congratulations! You have won a $1000 gift card. Click http://bit.ly/claim-now to claim your prize "
             "before midnight!", "The meeting moved to 3pm; the agenda is on the shared drive as usual."),
}


def _fired(response: pb.ModerateResponse) -> set[str]:
    return {c.category for c in response.categories if c.action != pb.ALLOW}


@pytest.mark.parametrize("name", sorted(CASES))
def test_clear_positive_fires_its_category_with_span_evidence(stub: pb_grpc.ModerationServiceStub, name: str) -> None:
    text = CASES[name][0]
    response = moderate(stub, text)
    assert name in _fired(response), (name, response)
    spans = [e.text_span for e in response.evidence if e.category == name and e.WhichOneof("kind") == "text_span"]
    assert spans and all(0 <= s.start < s.end <= len(text) and text[s.start:s.end] == s.text for s in spans), response
    if name == "profanity":  # swearing aimed at nobody: reviewed, never blocked, under the default policy
        assert response.decision == pb.REVIEW, response
    else:
        assert response.decision in (pb.REVIEW, pb.BLOCK), response


@pytest.mark.parametrize("name", sorted(CASES))
def test_hard_negative_is_allowed(stub: pb_grpc.ModerationServiceStub, name: str) -> None:
    response = moderate(stub, CASES[name][1])
    assert response.decision == pb.ALLOW and not _fired(response), (name, response)
    assert not response.degraded, response


def test_default_policy_runs_balanced_and_names_the_models_it_used(stub: pb_grpc.ModerationServiceStub) -> None:
    # Balanced: every text through text_moderation, and text_semantic only where a fast score is
    # uncertain (the band); a response names exactly the models that judged it and times their stages.
    responses = [moderate(stub, text) for pair in CASES.values() for text in pair]
    second = []
    for response in responses:
        names, stages = {m.name for m in response.models}, {t.stage for t in response.timings}
        assert "text_moderation" in names, response
        assert ("text_semantic" in names) == ("text_semantic" in stages), response
        second.append("text_semantic" in names)
    assert any(second) and not all(second), second  # neither the fast nor the accurate profile
