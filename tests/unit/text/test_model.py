"""Tests for services/text/model.py: the KServe tensor contract, scores and blocklist output."""

from __future__ import annotations

import json
from typing import Any

from pathlib import Path

import numpy as np
import pytest
import yaml

from services.common.contracts import text as contract
from services.common.errors import InvalidInputError
from services.common.text_match.lexicon import Lexicon, LexiconEntry
from services.text.model import TextModerationModel


#: the default policy's review threshold per text category (config/policies/default.yaml)
DEFAULT_REVIEW = {name: float(entry["review"]) for name, entry in yaml.safe_load(
    (Path(__file__).resolve().parents[3] / "config" / "policies" / "default.yaml").read_text())["categories"].items()}


def batch(*texts: str) -> dict[str, np.ndarray]:
    return {"TEXT": np.array([[t.encode("utf-8")] for t in texts], dtype=object)}


def matches(output: dict[str, np.ndarray], index: int) -> list[dict[str, Any]]:
    decoded: list[dict[str, Any]] = json.loads(output["MATCHES"][index, 0].decode("utf-8"))
    return decoded


def test_output_shapes_and_types(text_model: TextModerationModel) -> None:
    out = text_model.infer(batch("hello", "world", ""))
    assert set(out) == {spec.name for spec in contract.OUTPUTS}
    assert all(out[name].shape == (3, 1) for name in out)
    assert all(out[name].dtype == np.float32 for name in (*contract.SCORE_OUTPUTS, "TARGET"))
    assert out["MATCHES"].dtype == object and isinstance(out["MATCHES"][0, 0], bytes)
    assert all(contract.decode_row({k: v[i] for k, v in out.items()}) for i in range(3))


def test_insult_scores_high_and_benign_low(text_model: TextModerationModel) -> None:
    out = text_model.infer(batch("You are a fucking idiot, shut up you stupid bitch",
                                 "Thanks for the lovely dinner, see you tomorrow at the station"))
    assert out["HARASSMENT"][0, 0] > 0.5
    assert max(float(out[name][1, 0]) for name in contract.SCORE_OUTPUTS) < 0.5


def test_evidence_cites_the_rule_span_and_target_is_set(text_model: TextModerationModel) -> None:
    text = "ok youareanidiot"
    out = text_model.infer(batch(text))
    spans = [e for e in json.loads(out["EVIDENCE"][0, 0]) if e["category"] == "harassment"]
    assert spans and spans[0]["source"] == "rule:insult_you"
    assert text[spans[0]["start"]:spans[0]["end"]] == "youareanidiot"
    assert out["TARGET"][0, 0] == 1.0


def test_obvious_sms_spam_scores_high(text_model: TextModerationModel) -> None:
    out = text_model.infer(batch("WINNER!! You have won a £1000 prize, call 09061701461 to claim",
                                 "Hey, are we still on for dinner tonight?"))
    assert out["SPAM"][0, 0] > 0.8
    assert out["SPAM"][1, 0] < 0.5


def test_matches_carry_original_offsets(text_model: TextModerationModel) -> None:
    text = "你个傻　.　逼，class"
    hits = matches(text_model.infer(batch(text)), 0)
    # addressed to 你, the insult is also harassment (issue 14 labelling): one hit per category
    assert sorted(h["category"] for h in hits) == ["harassment", "profanity"]
    [hit] = [h for h in hits if h["category"] == "profanity"]
    assert hit["term"] == "傻逼"
    assert (hit["start"], hit["end"], hit["text"]) == (2, 7, "傻　.　逼")
    assert text[hit["start"]:hit["end"]] == hit["text"]
    assert set(hit) == {"category", "term", "severity", "start", "end", "text", "source"}


def test_obfuscated_english_is_scored_and_matched(text_model: TextModerationModel) -> None:
    out = text_model.infer(batch("ｆｕｃｋ you, you piece of sh1t"))
    assert out["HARASSMENT"][0, 0] > 0.5
    # Aimed at someone: the insult rules' hits (insult_you, curse_at_you) point at the original (obfuscated)
    # text; the swear words are not profanity hits here (profanity is swearing aimed at nobody: context_rules
    # category_unless).
    assert {(h["category"], h["text"]) for h in matches(out, 0)} == {("harassment", "ｆｕｃｋ you"),
                                                                   ("harassment", "you piece of sh1t")}
    alone = text_model.infer(batch("ｆｕｃｋ this sh1t"))
    assert alone["PROFANITY"][0, 0] > 0.5
    assert {(h["category"], h["text"]) for h in matches(alone, 0)} == {("profanity", "ｆｕｃｋ"), ("profanity", "sh1t")}


def test_batch_order_is_preserved(text_model: TextModerationModel) -> None:
    texts = ["nice day", "fuck off", "nice day"]
    together = text_model.infer(batch(*texts))
    for index, text in enumerate(texts):
        alone = text_model.infer(batch(text))
        for name in contract.SCORE_OUTPUTS:
            assert together[name][index, 0] == pytest.approx(alone[name][0, 0], abs=1e-6)
        assert together["MATCHES"][index, 0] == alone["MATCHES"][0, 0]


def test_empty_batch(text_model: TextModerationModel) -> None:
    out = text_model.infer({"TEXT": np.empty((0, 1), dtype=object)})
    assert all(value.shape == (0, 1) for value in out.values())


def test_invalid_utf8_names_the_item(text_model: TextModerationModel) -> None:
    bad = {"TEXT": np.array([[b"fine"], [b"\xff\xfe broken"]], dtype=object)}
    with pytest.raises(InvalidInputError, match=r"TEXT\[1\].*UTF-8"):
        text_model.infer(bad)


@pytest.mark.parametrize("inputs, message", [
    ({"IMAGE": np.array([[b"x"]], dtype=object)}, "missing input tensor 'TEXT'"),
    ({"TEXT": np.array([b"x"], dtype=object)}, "shape"),
    ({"TEXT": np.array([[1.0]], dtype=np.float32)}, r"TEXT\[0\] must be UTF-8 bytes"),
    ({"TEXT": np.array([[b"x"]] * 65, dtype=object)}, "max_batch_size"),
])
def test_malformed_inputs_are_rejected(text_model: TextModerationModel, inputs: dict[str, np.ndarray],
                                       message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        text_model.infer(inputs)


def test_model_files_report_versions_and_hashes(text_model: TextModerationModel) -> None:
    files = {f.name: f for f in text_model.model_files()}
    assert set(files) == {"toxicity_en", "spam_en", "tfidf_en", "static_en", "text_heads_fast", "tfidf_zh_chars",
                          "text_heads_zh_semantic", "text_subheads_fast", "text_heads_zh_gate",
                          "lexicon",
                          "context_rules", "spam_signals"}
    assert all(len(files[n].sha256) == 64 for n in files)
    assert files["lexicon"].version == text_model.lexicon.version


def test_custom_lexicon(repository_root: Any) -> None:
    from services.common.serving.onnx_session import SessionOptions

    lexicon = Lexicon.build([LexiconEntry("brandx", "spam", 1, "tenant")])
    model = TextModerationModel(repository_root, SessionOptions(), lexicon=lexicon)
    [hit] = matches(model.infer(batch("buy BRANDX now")), 0)
    assert (hit["term"], hit["start"], hit["end"], hit["source"]) == ("brandx", 4, 10, "tenant")
    assert {f.name: f.version for f in model.model_files()}["lexicon"] == lexicon.version


def test_contract_metadata(text_model: TextModerationModel) -> None:
    assert (text_model.name, text_model.version, text_model.platform, text_model.max_batch_size) == (
        "text_moderation", "2", "auditmesh_text_pipeline", 64)
    assert [s.name for s in text_model.inputs] == ["TEXT"]
    assert tuple(text_model.outputs) == contract.OUTPUTS


def test_chinese_is_scored_by_the_multilingual_heads_not_the_english_ones(text_model: TextModerationModel) -> None:
    # The English heads would score only the structured features of a Chinese text; the multilingual heads
    # (text_heads_zh_semantic) read it: a helpline notice stays below every review threshold, a wish that
    # the reader die does not.
    texts = ["如果你有轻生的念头，请拨打心理援助热线", "你怎么还不去死，活着浪费空气", "gg 你好 you are an idiot"]
    out = text_model.infer(batch(*texts))
    helpline = {name: float(out[name][0, 0]) for name in contract.SCORE_OUTPUTS}
    assert all(score < DEFAULT_REVIEW[name.lower()] for name, score in helpline.items()), helpline
    wish = {name: float(out[name][1, 0]) for name in contract.SCORE_OUTPUTS}
    assert max(wish["HARASSMENT"], wish["SELF_HARM"]) >= DEFAULT_REVIEW["harassment"], wish
    assert json.loads(out["MATCHES"][1, 0]) and not json.loads(out["MATCHES"][0, 0])
    assert any(out[name][2, 0] > 0.0 for name in contract.SCORE_OUTPUTS)  # five English words: the heads read them


#: benign Chinese chat with one Latin token: read as English among unknown tokens it was noise to the heads
#: (11 of these 16 lines were flagged before `MIXED_ENGLISH_WORDS`)
CHINESE_WITH_A_LATIN_TOKEN = ["打call，加油！", "今天有点emo了", "周末一起去KTV吧", "我用的是iPhone，拍照很清楚",
                              "明天的meeting改到下午三点", "他是我的idol", "这首歌的beat很好听", "好的ok，没问题",
                              "买了个switch，周末一起玩", "我们team今天加班", "这家店的vibe很棒", "下周去hk出差",
                              "awsl，太可爱了"]


def test_chinese_with_one_latin_token_is_left_to_the_chinese_readers(text_model: TextModerationModel) -> None:
    out = text_model.infer(batch(*CHINESE_WITH_A_LATIN_TOKEN))
    for index, text in enumerate(CHINESE_WITH_A_LATIN_TOKEN):
        scores = {name: float(out[name][index, 0]) for name in contract.SCORE_OUTPUTS}
        assert all(score < DEFAULT_REVIEW[name.lower()] for name, score in scores.items()), (text, scores)
        assert not json.loads(out["MATCHES"][index, 0]), text


def test_two_english_words_padded_with_chinese_are_still_read(text_model: TextModerationModel) -> None:
    texts = ["fuck you 哈哈", "stupid bitch 你好你好"]
    out = text_model.infer(batch(*texts))
    for index, text in enumerate(texts):
        assert max(float(out[name][index, 0]) for name in contract.SCORE_OUTPUTS) >= 0.5, text


def test_latin_insults_inside_chinese_are_still_matched(text_model: TextModerationModel) -> None:
    texts = ["你真是个idiot", "你是不是stupid啊", "你这个loser永远找不到女朋友"]
    out = text_model.infer(batch(*texts))
    for index, text in enumerate(texts):
        assert "harassment" in {m["category"] for m in json.loads(out["MATCHES"][index, 0])}, text


#: emoji-only chat messages: the tokenizers read every emoji as one unknown token, so the heads scored every
#: such message the same (`sexual` 0.77, `self_harm` 0.42: REVIEW under the default policy); without a
#: letter to read the English heads now abstain (`english_reads`)
EMOJI_ONLY = ["😊", "🍕🍕", "👍", "🎉🎉🎉", "🙂", "🌧️", "😂😂", "!!!", "12345", "🇺🇸", "🇯🇵🇰🇷", "🇺🇦❤️", "🇧🇷🇧🇷🇧🇷"]


def test_emoji_only_messages_stay_below_every_review_threshold(text_model: TextModerationModel) -> None:
    out = text_model.infer(batch(*EMOJI_ONLY, "ok 😊"))
    for index, text in enumerate(EMOJI_ONLY):
        scores = {name: round(float(out[name][index, 0]), 3) for name in contract.SCORE_OUTPUTS}
        flagged = {name: score for name, score in scores.items() if score >= DEFAULT_REVIEW[name.lower()]}
        assert not flagged, (text, scores)
    assert any(out[name][len(EMOJI_ONLY), 0] > 0.0 for name in contract.SCORE_OUTPUTS)  # a letter: the heads read it


def test_letters_written_as_symbols_are_read(text_model: TextModerationModel) -> None:
    # the last one has no lexicon hit: only the heads can read it, and they do
    out = text_model.infer(batch("🅨🅞🅤 🅐🅡🅔 🅐🅝 🅘🅓🅘🅞🅣", "🇮 🇼🇮🇱🇱 🇰🇮🇱🇱 🇾🇴🇺", "🇮'🇱🇱 🇫🇮🇳🇩 🇾🇴🇺 🇦🇳🇩 🇾🇴🇺🇷 🇰🇮🇩🇸"))
    assert out["HARASSMENT"][0, 0] >= 0.5
    assert out["VIOLENCE"][1, 0] >= 0.5 and json.loads(out["MATCHES"][1, 0])
    assert out["VIOLENCE"][2, 0] >= 0.5 and not json.loads(out["MATCHES"][2, 0])


def test_three_real_flags_that_spell_a_slur_are_matched(text_model: TextModerationModel) -> None:
    out = text_model.infer(batch("🇳🇮🇬🇬🇪🇷"))  # Nicaragua, Guernsey, Eritrea: each a real flag
    assert [hit["category"] for hit in json.loads(out["MATCHES"][0, 0])] == ["hate"]
