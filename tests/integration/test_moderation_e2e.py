"""End to end through the real router and the real text, vision and OCR services (real models)."""

from __future__ import annotations

import io

import grpc
import pytest
from auditmesh.v1 import moderation_pb2 as pb
from auditmesh.v1 import moderation_pb2_grpc as pb_grpc
from PIL import Image

from bench.render import render_photo_like, render_text_image, text_layout
from tests.stubs import KEY_A, KEY_B, item, moderate


def category(response: pb.ModerateResponse, name: str) -> pb.CategoryResult:
    return next(c for c in response.categories if c.category == name)


def test_clean_text_is_allowed(stub: pb_grpc.ModerationServiceStub) -> None:
    response = moderate(stub, "Thanks for the lovely dinner last night, see you on Friday!")
    assert response.decision == pb.ALLOW, response
    assert not response.degraded
    assert response.policy_name == "default" and response.policy_version == "2026-12-02.1"
    assert "text_moderation" in {m.name for m in response.models}
    assert {t.stage for t in response.timings} >= {"text", "fusion", "total"}
    assert category(response, "harassment").score < 0.5 and category(response, "hate").score < 0.5


@pytest.mark.parametrize(("text", "name"), [
    ("You are a worthless pathetic idiot and everyone hates you", "harassment"),
    ("You are a worthless pathetic idiot and everyone hates you, go kill yourself", "self_harm"),
])
def test_toxic_english_is_blocked_with_the_classifier_as_evidence(stub: pb_grpc.ModerationServiceStub, text: str,
                                                                   name: str) -> None:
    response = moderate(stub, text)
    assert response.decision == pb.BLOCK, response
    verdict = category(response, name)
    assert verdict.action == pb.BLOCK and verdict.rule.startswith((f"categories.{name}.block", "blocklist:"))
    spans = [e.text_span for e in response.evidence if e.category == name and e.WhichOneof("kind") == "text_span"]
    assert spans and all(text[s.start:s.end] == s.text and s.end > s.start for s in spans)


def test_obfuscated_chinese_blocklist_term_is_found_at_its_original_offsets(stub: pb_grpc.ModerationServiceStub) -> None:
    text = "你这个傻　.　逼，滚"   # ideographic spaces and a dot inserted inside 傻逼
    response = moderate(stub, text)
    assert response.decision == pb.BLOCK, response
    hits = [e for e in response.evidence if e.WhichOneof("kind") == "text_span" and e.text_span.matched_term == "傻逼"]
    assert hits, response.evidence
    span = hits[0].text_span
    assert text[span.start:span.end] == "傻　.　逼" == span.text
    assert span.lexicon == "default" and not span.from_ocr


def test_fullwidth_latin_blocklist_term(stub: pb_grpc.ModerationServiceStub) -> None:
    text = "what the ｆ.ｕ.ｃ.ｋ man"
    response = moderate(stub, text)
    assert response.decision in (pb.BLOCK, pb.REVIEW), response
    spans = [e.text_span for e in response.evidence if e.text_span.matched_term == "fuck"]
    assert spans and text[spans[0].start:spans[0].end] == "ｆ.ｕ.ｃ.ｋ"


def test_text_in_an_image_is_read_and_blocked_with_line_and_polygon(stub: pb_grpc.ModerationServiceStub) -> None:
    lines = ["Daily deals 2026", "你这个傻逼", "Visit our store"]
    image = render_text_image(lines, background="noisy", seed=3)
    response = moderate(stub, "look at this", image)
    assert response.decision == pb.BLOCK, response
    ocr_lines = [e.ocr_line for e in response.evidence if e.WhichOneof("kind") == "ocr_line" and e.part_index == 1]
    assert any("傻逼" in line.text for line in ocr_lines), response.evidence
    line = next(line for line in ocr_lines if "傻逼" in line.text)
    drawn = text_layout(lines)[1]
    xs, ys = [p.x for p in line.polygon], [p.y for p in line.polygon]
    assert len(line.polygon) == 4 and line.confidence > 0.5
    assert min(xs) <= drawn.left + 8 and max(xs) >= drawn.right - 8  # the polygon surrounds the drawn line
    assert min(ys) <= drawn.top + 8 and max(ys) >= drawn.bottom - 8
    spans = [e.text_span for e in response.evidence if e.WhichOneof("kind") == "text_span" and e.text_span.from_ocr]
    assert any(s.matched_term == "傻逼" and s.ocr_line_index == line.line_index for s in spans)
    assert {t.stage for t in response.timings} >= {"vision", "ocr", "ocr_text"}
    assert {m.name for m in response.models} >= {"ppocr_det", "ppocr_rec", "opennsfw"}


def gif_of(frames: list[bytes]) -> bytes:
    """An animated GIF of `frames` (still images), 80 ms each."""
    images = [Image.open(io.BytesIO(frame)).convert("RGB") for frame in frames]
    out = io.BytesIO()
    images[0].save(out, "GIF", save_all=True, append_images=images[1:], duration=80, loop=0)
    return out.getvalue()


def test_text_in_one_frame_of_a_gif_is_read_and_the_evidence_names_the_frame(stub: pb_grpc.ModerationServiceStub) -> None:
    # ten frames of an advert, the ninth (frame 8) with an insult: a viewer sees it, so it is judged
    frames = [render_text_image(["Daily deals 2026", f"Save {n}0% today", "Visit our store"], size=(480, 240))
              for n in range(10)]
    frames[8] = render_text_image(["Daily deals 2026", "你这个傻逼", "Visit our store"], size=(480, 240))
    response = moderate(stub, gif_of(frames))
    assert response.decision == pb.BLOCK, response
    spans = [e for e in response.evidence if e.WhichOneof("kind") == "text_span" and e.text_span.from_ocr
             and e.text_span.matched_term == "傻逼"]
    assert spans and all((e.part_index, e.frame_index) == (0, 8) for e in spans), response.evidence
    assert {e.frame_index for e in response.evidence if e.WhichOneof("kind") == "image_score"} >= {0, 8}
    assert {t.stage for t in response.timings} >= {"frames", "vision", "ocr"}
    benign = moderate(stub, gif_of(frames[:8]))
    assert benign.decision == pb.ALLOW, benign


def test_a_frame_bomb_is_refused_from_its_header(stub: pb_grpc.ModerationServiceStub) -> None:
    # 1,001 frames (the router's limits.max_animation_frames is 1,000), a few kilobytes on the wire
    images = [Image.new("RGB", (4, 4), (255 * (i % 2), 0, 0)) for i in range(1001)]
    out = io.BytesIO()
    images[0].save(out, "GIF", save_all=True, append_images=images[1:], duration=20, loop=0)
    with pytest.raises(grpc.RpcError) as caught:
        moderate(stub, "caption", out.getvalue())
    assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert caught.value.details().startswith("item.parts[1].image is an animation of 1001 frames; the limit is 1000 "
                                             "(limits.max_animation_frames)")


def test_benign_photo_is_allowed_with_image_scores(stub: pb_grpc.ModerationServiceStub) -> None:
    response = moderate(stub, render_photo_like((640, 480), seed=5))
    assert response.decision == pb.ALLOW, response
    scores = [e.image_score for e in response.evidence if e.WhichOneof("kind") == "image_score"]
    assert scores and set(scores[0].scores) == {"sexual", "violence"}
    assert all(0.0 <= v <= 1.0 for v in scores[0].scores.values())


def test_corrupt_image_is_invalid_argument_naming_the_part(stub: pb_grpc.ModerationServiceStub) -> None:
    with pytest.raises(grpc.RpcError) as caught:
        moderate(stub, "caption", b"\xff\xd8\xff\xe0 this is not really a jpeg")
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "item.parts[1].image" in caught.value.details()


def test_truncated_image_is_invalid_argument(stub: pb_grpc.ModerationServiceStub) -> None:
    jpeg = render_photo_like((320, 240), seed=1)
    with pytest.raises(grpc.RpcError) as caught:
        moderate(stub, jpeg[: len(jpeg) // 3])
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "parts[0].image" in caught.value.details()


def test_missing_and_wrong_api_key_are_unauthenticated(stub: pb_grpc.ModerationServiceStub) -> None:
    with pytest.raises(grpc.RpcError) as caught:
        stub.Moderate(pb.ModerateRequest(item=item("hi")), timeout=10)
    assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "x-api-key" in caught.value.details()
    with pytest.raises(grpc.RpcError) as caught:
        moderate(stub, "hi", key="not-a-key")
    assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_tenant_cannot_use_a_policy_it_is_not_given(stub: pb_grpc.ModerationServiceStub) -> None:
    with pytest.raises(grpc.RpcError) as caught:
        moderate(stub, "hi", key=KEY_B, policy="default")
    assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED


def test_custom_blocklist_of_one_tenant_policy_does_not_apply_to_another(stub: pb_grpc.ModerationServiceStub) -> None:
    text = "honestly megacorp sucks"
    strict = moderate(stub, text, key=KEY_B)
    assert strict.decision == pb.BLOCK and strict.policy_name == "strict"
    assert any(e.text_span.lexicon == "policy:strict" for e in strict.evidence)
    default = moderate(stub, text, key=KEY_A)
    assert not any(c.category.startswith("custom.") for c in default.categories)


def test_oversized_text_is_resource_exhausted_with_the_limit(stub: pb_grpc.ModerationServiceStub) -> None:
    with pytest.raises(grpc.RpcError) as caught:
        moderate(stub, "a" * 20001)
    assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "the limit is 20000" in caught.value.details()


def test_batch_answers_every_item_in_order_with_per_item_errors(stub: pb_grpc.ModerationServiceStub) -> None:
    request = pb.ModerateBatchRequest(items=[item("good morning", item_id="a"), item(b"garbage", item_id="b"),
                                             item("你个傻逼", item_id="c")])
    response = stub.ModerateBatch(request, metadata=[("x-api-key", KEY_A)], timeout=30)
    assert [r.item_id for r in response.results] == ["a", "b", "c"]
    assert response.results[0].decision == pb.ALLOW
    assert response.results[1].error.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert "items[1].parts[0].image" in response.results[1].error.message
    # Taxonomy 2: an insult addressed to someone ("你个傻逼") is harassment and blocks; the bare word
    # "傻逼" aimed at nobody is profanity, which the default policy reviews at most.
    assert response.results[2].decision == pb.BLOCK


def test_stream_answers_each_request_with_its_id(stub: pb_grpc.ModerationServiceStub) -> None:
    texts = {f"m{i}": text for i, text in enumerate(["hello all", "你个傻逼", "nice stream!", "", "gg wp"])}
    requests = [pb.ModerateRequest(request_id=rid, item=item(text, item_id=rid), deadline_ms=5000)
                for rid, text in texts.items()]
    responses = list(stub.ModerateStream(iter(requests), metadata=[("x-api-key", KEY_A)], timeout=60))
    by_id = {r.request_id: r for r in responses}
    assert set(by_id) == set(texts)
    assert by_id["m1"].decision == pb.BLOCK
    assert by_id["m0"].decision == pb.ALLOW
    assert by_id["m3"].error.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]  # empty text: that item only
