"""Tests for services/text/semantic.py and embedding.py: batched equals unbatched, pooling, evidence."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from services.common.contracts import text as contract
from services.text.semantic import TextSemanticModel, blank_han, corroborated, english_reads, logits
from services.text.zh_ngram import without_untargeted

TEXTS = ["I'll be outside your office at five, come alone", "see you at the station tomorrow",
         "youareanidiot", "Congratulations! You won an iPhone, claim at bit.ly/x", ""]


#: the default policy's review threshold per text category (config/policies/default.yaml)
DEFAULT_REVIEW = {name: float(entry["review"]) for name, entry in yaml.safe_load(
    (Path(__file__).resolve().parents[3] / "config" / "policies" / "default.yaml").read_text())["categories"].items()}


def batch(*texts: str) -> dict[str, np.ndarray]:
    return {"TEXT": np.array([[t.encode("utf-8")] for t in texts], dtype=object)}


def test_serves_the_contract(semantic_model: TextSemanticModel) -> None:
    out = semantic_model.infer(batch(*TEXTS))
    assert set(out) == {spec.name for spec in contract.OUTPUTS} and all(v.shape == (len(TEXTS), 1) for v in out.values())
    assert semantic_model.name == "text_semantic"


def test_batched_equals_unbatched(semantic_model: TextSemanticModel) -> None:
    together = semantic_model.infer(batch(*TEXTS))
    for index, text in enumerate(TEXTS):
        alone = semantic_model.infer(batch(text))
        for name in contract.SCORE_OUTPUTS:
            assert together[name][index, 0] == pytest.approx(alone[name][0, 0], abs=1e-4), (text, name)
        assert together["MATCHES"][index, 0] == alone["MATCHES"][0, 0]


def test_embeddings_are_unit_length_and_contributions_sum_to_the_dot_product(semantic_model: TextSemanticModel) -> None:
    embedded = semantic_model._embedder.embed(TEXTS[:3])
    assert embedded.vectors.shape == (3, 384)
    assert np.allclose(np.linalg.norm(embedded.vectors, axis=1), 1.0, atol=1e-5)
    weights = np.linspace(-1, 1, 384).astype(np.float32)
    assert np.allclose(embedded.token_contributions(weights).sum(axis=1), embedded.vectors @ weights, atol=1e-4)


def test_padding_does_not_change_an_embedding(semantic_model: TextSemanticModel) -> None:
    short = semantic_model._embedder.embed(["hi"]).vectors[0]
    padded = semantic_model._embedder.embed(["hi", "a much longer sentence that forces padding of the first"]).vectors[0]
    assert np.allclose(short, padded, atol=1e-5)


def test_threat_without_keyword_scores_higher_than_a_benign_plan(semantic_model: TextSemanticModel) -> None:
    out = semantic_model.infer(batch("I know where you live. Watch your back.", "see you at the station tomorrow"))
    assert out["VIOLENCE"][0, 0] > 0.5 > out["VIOLENCE"][1, 0]


def test_flagged_categories_cite_spans_inside_the_text(semantic_model: TextSemanticModel) -> None:
    out = semantic_model.infer(batch(*TEXTS))
    for index, text in enumerate(TEXTS):
        for span in json.loads(out["EVIDENCE"][index, 0]):
            assert 0 <= span["start"] < span["end"] <= len(text) and span["score"] >= 0.5
            assert span["source"].startswith(("rule:", "lexicon:", "head:"))


def test_logits_are_clipped() -> None:
    assert np.isfinite(logits(np.array([0.0, 0.5, 1.0], np.float32))).all()
    assert logits(np.array([0.5], np.float32))[0] == pytest.approx(0.0)


def test_chinese_keeps_the_fast_scores_and_cannot_hide_english(semantic_model: TextSemanticModel) -> None:
    # MiniLM reads Chinese as [UNK]s: rows without a letter it can read keep the fast path's scores, raised
    # only by the Chinese n-gram heads; the English rows of the same batch get the semantic heads' scores.
    texts = ["明天降温，出门记得加衣服", "我知道你住哪，出门小心点", "I'll be outside your office at five, come alone"]
    semantic = semantic_model.infer(batch(*texts))
    fast = semantic_model.fast.infer(batch(*texts))
    zh_texts = [a.segmented.text for a in semantic_model.fast.analyzer.analyse(texts[:2])]
    chinese = without_untargeted(semantic_model._zh.score(zh_texts), zh_texts)  # violence/self_harm need a target
    for column, name in enumerate(contract.SCORE_OUTPUTS):
        assert np.allclose(semantic[name][:2, 0], np.maximum(fast[name][:2, 0], chinese[:, column]), atol=1e-6), name
    assert not all(np.array_equal(semantic[name][2], fast[name][2]) for name in contract.SCORE_OUTPUTS)
    # Padding the English threat with Chinese does not take it away from the semantic model, and with
    # Chinese in a text the semantic score never goes below the fast one.
    padded = texts[2] + " " + "你好朋友" * 10
    both, cheap = semantic_model.infer(batch(padded)), semantic_model.fast.infer(batch(padded))
    assert both["VIOLENCE"][0, 0] >= 0.5
    assert all(both[name][0, 0] >= cheap[name][0, 0] for name in contract.SCORE_OUTPUTS)
    assert not english_reads(texts[0]) and english_reads(padded) and blank_han("ok 好 ok") == "ok   ok"


def test_hits_count_only_when_the_semantic_score_corroborates_them(semantic_model: TextSemanticModel) -> None:
    # A lexicon hit in English the heads do not corroborate (a bird's name, a quoted slur condemned)
    # is held back; the fast model reports it; a Chinese text keeps every hit.
    texts = ["the great tit is a regular at our feeder", "you stupid slut, nobody wants you here",
             "你这个傻逼"]
    semantic, fast = semantic_model.infer(batch(*texts)), semantic_model.fast.infer(batch(*texts))
    floor = semantic_model.corroboration_floor
    assert floor > 0
    for index in range(len(texts)):
        kept = json.loads(semantic["MATCHES"][index, 0])
        everything = json.loads(fast["MATCHES"][index, 0])
        assert kept == [h for h in everything if h in kept]  # a subset, in order
        for hit in everything:
            score = float(semantic[next(n for n, c in contract.SCORE_OUTPUTS.items() if c == hit["category"])][index, 0])
            assert (hit in kept) == (score >= floor or index == 2), (texts[index], hit, score)
    assert json.loads(fast["MATCHES"][0, 0]) and not json.loads(semantic["MATCHES"][0, 0])
    assert json.loads(semantic["MATCHES"][1, 0]) and json.loads(semantic["MATCHES"][2, 0]) == json.loads(fast["MATCHES"][2, 0])


def test_corroborated_keeps_hits_at_or_above_the_floor() -> None:
    hits = [contract.LexiconHit("sexual", "tit", 1, 0, 3, "tit"), contract.LexiconHit("hate", "x", 3, 4, 5, "x")]
    scores = np.zeros(len(contract.CATEGORIES), dtype=np.float32)
    scores[contract.CATEGORIES.index("hate")] = 0.25
    assert corroborated(hits, scores, 0.25) == (hits[1],)
    assert corroborated(hits, scores, 0.0) == tuple(hits)


def test_a_top_tier_hate_or_sexual_hit_below_the_floor_stays_at_review() -> None:
    severe = [contract.LexiconHit("hate", "x", 3, 0, 1, "x"), contract.LexiconHit("sexual", "y", 3, 2, 3, "y")]
    others = [contract.LexiconHit("violence", "z", 3, 4, 5, "z"), contract.LexiconHit("hate", "w", 2, 6, 7, "w")]
    kept = corroborated(severe + others, np.zeros(len(contract.CATEGORIES), dtype=np.float32), 0.4)
    assert [(h.term, h.max_action) for h in kept] == [("x", "review"), ("y", "review")]


#: friendly frames an evader might wrap a slur in, so the semantic model scores the text low
_FRIENDLY_FRAMES = ("{t}", "lol {t}", "happy birthday you {t}", "good morning to all the {t}s",
                    "the {t} next door brought cookies", "I love you {t}", "thanks for the recipe, {t}")


def test_no_listed_slur_drops_out_of_the_accurate_model_in_friendly_words(semantic_model: TextSemanticModel) -> None:
    """Every top-tier English hate term of the default lexicon, in each friendly frame (its plural too),
    still comes out of text_semantic as a hate hit (corroborated, or at most REVIEW): the corroboration
    floor must not be a way to get a slur through."""
    terms = sorted({e.term for e in semantic_model.fast.lexicon.entries
                    if e.category == "hate" and e.severity == 3 and e.term.isascii()})
    assert len(terms) >= 10
    texts = [frame.format(t=term) for term in terms for frame in _FRIENDLY_FRAMES]
    missing = []
    for start in range(0, len(texts), 64):
        out = semantic_model.infer(batch(*texts[start:start + 64]))
        missing += [text for index, text in enumerate(texts[start:start + 64])
                    if not any(h["category"] == "hate" for h in json.loads(out["MATCHES"][index, 0]))]
    assert not missing, missing[:10]


def test_chinese_entries_matched_in_latin_letters_need_no_english_corroboration() -> None:
    initials = contract.LexiconHit("harassment", "你妈死了", 3, 0, 4, "nmsl")
    latin = contract.LexiconHit("profanity", "sb", 2, 5, 7, "sb")
    assert corroborated([initials, latin], np.zeros(7, dtype=np.float32), 0.2) == (initials,)


def test_emoji_only_messages_stay_below_every_review_threshold(semantic_model: TextSemanticModel) -> None:
    texts = ["😊", "🍕🍕", "👍", "🎉🎉🎉", "🙂", "🌧️", "😂😂", "🇺🇸", "🇯🇵🇰🇷", "🇺🇦❤️"]  # flags: emoji, not "us"
    out = semantic_model.infer(batch(*texts))
    for index, text in enumerate(texts):
        scores = {name: round(float(out[name][index, 0]), 3) for name in contract.SCORE_OUTPUTS}
        flagged = {name: score for name, score in scores.items() if score >= DEFAULT_REVIEW[name.lower()]}
        assert not flagged, (text, scores)


def test_a_threat_spelled_in_regional_indicators_is_read(semantic_model: TextSemanticModel) -> None:
    out = semantic_model.infer(batch("🇮'🇱🇱 🇫🇮🇳🇩 🇾🇴🇺 🇦🇳🇩 🇾🇴🇺🇷 🇰🇮🇩🇸"))  # no lexicon hit: MiniLM reads it
    assert out["VIOLENCE"][0, 0] >= 0.5


def test_chinese_texts_get_at_least_the_chinese_ngram_heads_scores(semantic_model: TextSemanticModel) -> None:
    texts = ["再敢说一句我就弄死你全家", "今天天气真好，我们去公园散步吧", "gg 你好 see you", "see you at the station"]
    out = semantic_model.infer(batch(*texts))
    analyses = semantic_model.fast.analyzer.analyse(texts)
    zh_texts = [a.segmented.text for a in analyses[:3]]
    chinese = without_untargeted(semantic_model._zh.score(zh_texts), zh_texts)
    closed = semantic_model.fast.score(texts).zh_closed
    assert closed[:2] == [False, True]  # the Chinese harm gate: the threat is let through, the weather is not
    for column, name in enumerate(contract.SCORE_OUTPUTS):
        for row in range(3):
            if not closed[row]:
                assert out[name][row, 0] >= chinese[row, column] - 1e-6, (texts[row], name)
    assert out["VIOLENCE"][0, 0] >= 0.5
    assert {f.name for f in semantic_model.model_files()} >= {"tfidf_zh", "text_heads_zh"}
    # the fast model has no n-gram heads: its Chinese scores are the multilingual heads' (the English ones abstain)
    fast = semantic_model.fast.infer(batch(texts[0]))
    multilingual = semantic_model.fast._zh_semantic.score([zh_texts[0]])
    for column, name in enumerate(contract.SCORE_OUTPUTS):
        assert abs(float(fast[name][0, 0]) - float(multilingual[0, column])) < 1e-6, name
