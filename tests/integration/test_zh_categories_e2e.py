"""Chinese moderation through the router, one harmful message per category, plus text read by OCR.

Each message uses no single listed word for its category where possible (a threat frame, a
self-harm incitement frame, a group-hate frame), so the phrase rules are exercised end to end; a
benign look-alike next to each shows the path does not block ordinary text.
"""

from __future__ import annotations

import pytest

from auditmesh.v1 import moderation_pb2 as pb
from auditmesh.v1 import moderation_pb2_grpc as pb_grpc
from bench.render import render_text_image
from tests.stubs import moderate

CASES = [
    ("harassment", "楼上回家照照镜子吧，丑得我隔夜饭都吐出来了", "我家楼上新装修了，回家看看"),
    ("hate", "河南人都是骗子，没一个好东西", "我是河南人，欢迎来河南玩"),
    ("violence", "我知道你住哪，出门小心点", "明天降温，出门记得加衣服"),
    ("self_harm", "你怎么还不去死，活着浪费空气", "如果你有轻生的念头，请拨打心理援助热线"),
    ("sexual", "同城约炮，今晚懂的来", "学校开展防性侵教育，告诉孩子保护隐私部位"),
    ("profanity", "操，又掉线了", "今天的体操比赛很精彩"),
    ("spam", "在家兼职刷单，日赚三百，加我薇信 haoyun668", "周末兼职：图书馆招志愿者，需到现场报名"),
]


def _flagged(response: pb.ModerateResponse, name: str) -> bool:
    """A category the policy does not list appears in the response only when the lexicon hits it."""
    result = next((c for c in response.categories if c.category == name), None)
    return result is not None and result.action in (pb.BLOCK, pb.REVIEW)


@pytest.mark.parametrize(("category", "harmful", "benign"), CASES, ids=[c[0] for c in CASES])
def test_each_category_is_flagged_and_its_lookalike_is_not(stub: pb_grpc.ModerationServiceStub, category: str,
                                                           harmful: str, benign: str) -> None:
    response = moderate(stub, harmful)
    assert response.decision in (pb.BLOCK, pb.REVIEW), response
    assert _flagged(response, category), response
    spans = [e for e in response.evidence if e.WhichOneof("kind") == "text_span" and e.category == category]
    assert spans, response.evidence
    clean = moderate(stub, benign)
    assert not _flagged(clean, category), clean


def test_threat_read_by_ocr_from_an_image_is_flagged(stub: pb_grpc.ModerationServiceStub) -> None:
    image = render_text_image(["今日特价", "我知道你住哪，出门小心点"], seed=5)
    response = moderate(stub, "看图", image)
    assert response.decision in (pb.BLOCK, pb.REVIEW), response
    assert _flagged(response, "violence"), response
    spans = [e.text_span for e in response.evidence
             if e.WhichOneof("kind") == "text_span" and e.text_span.from_ocr and e.category == "violence"]
    assert spans, response.evidence


#: Chinese chat with one Latin token is not read by the English heads (it was noise to them), two English
#: words padded with Chinese are, and Latin insults inside Chinese are matched by the zh rules; a rule's
#: character typed in pinyin is read back (zh_syllables.py), an ordinary one changes nothing
LATIN_TOKENS_BENIGN = ["打call，加油！", "我们team今天加班", "好的ok，没问题", "你太有才了，哈哈", "他是he南人，很热情"]
LATIN_TOKENS_HARMFUL = [("harassment", "你真是个idiot"), ("harassment", "fuck you 哈哈"),
                        ("harassment", "菜就多练，别在这丢人现眼"), ("self_harm", "活着也是拖累家人，早点走吧"),
                        ("hate", "he南人都shi骗子"), ("violence", "我zhi道你住哪，出门小心点")]


@pytest.mark.parametrize("text", LATIN_TOKENS_BENIGN)
def test_chinese_chat_with_a_latin_token_is_allowed(stub: pb_grpc.ModerationServiceStub, text: str) -> None:
    response = moderate(stub, text)
    assert response.decision == pb.ALLOW, response


@pytest.mark.parametrize(("category", "text"), LATIN_TOKENS_HARMFUL, ids=[t for _, t in LATIN_TOKENS_HARMFUL])
def test_latin_insults_padding_and_implied_addressees_are_flagged(stub: pb_grpc.ModerationServiceStub,
                                                                  category: str, text: str) -> None:
    response = moderate(stub, text)
    assert response.decision in (pb.BLOCK, pb.REVIEW) and _flagged(response, category), response


#: Messages that no list and no phrase rule holds (the text model reports no MATCHES for them): only the
#: multilingual encoder's heads (text_heads_zh_semantic, in every profile) read them. A crisis post and
#: a sexual demand to a streamer; next to them, ordinary chat.
HEADS_ONLY = [("self_harm", "活着真的好累，我已经把遗书写好了"), ("sexual", "穿这么少直播不就是想让人看吗，给哥私发几张")]
HEADS_ONLY_BENIGN = ["兄弟们这波稳了，今晚吃鸡", "我们这边下雨了，记得带伞"]


@pytest.mark.parametrize(("category", "text"), HEADS_ONLY, ids=[c for c, _ in HEADS_ONLY])
def test_a_message_no_rule_holds_is_flagged_by_the_multilingual_heads(stub: pb_grpc.ModerationServiceStub,
                                                                      category: str, text: str) -> None:
    response = moderate(stub, text)
    assert response.decision in (pb.BLOCK, pb.REVIEW), response
    assert _flagged(response, category), response
    spans = [e.text_span for e in response.evidence if e.WhichOneof("kind") == "text_span" and e.category == category]
    assert spans and not any(s.matched_term for s in spans), response.evidence  # a score, not a listed term


@pytest.mark.parametrize("text", HEADS_ONLY_BENIGN)
def test_ordinary_chinese_chat_is_allowed(stub: pb_grpc.ModerationServiceStub, text: str) -> None:
    assert moderate(stub, text).decision == pb.ALLOW
