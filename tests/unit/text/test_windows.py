"""Long texts read in windows (services/text/windows.py): the pure cut and merge, then both models."""

from __future__ import annotations

import json
from typing import Callable

import numpy as np
import pytest

from services.common.contracts import text as contract
from services.text.model import TextModerationModel
from services.text.semantic import TextSemanticModel
from services.text.semantic import SEMANTIC_MAX_WINDOWS
from services.text.windows import WindowConfig, cut, length_adjusted, merge, plan, screened_infer, windowed_infer

SMALL = WindowConfig(min_chars=100, window_chars=60)
BENIGN = ("We spent the weekend repainting the kitchen and the hallway. The blue came out lighter than the "
          "sample card, which we ended up liking more. Next month we will redo the bathroom tiles as well. ")
HARMFUL = "I know where you live and I am going to come over tonight and kill you."


def test_a_short_text_is_one_window() -> None:
    assert cut("hello there") == [(0, 11)]
    assert cut("") == [(0, 0)]


def test_windows_cover_the_text_and_end_at_sentences() -> None:
    text = "One two three four. Five six seven eight. " * 6
    spans = cut(text, SMALL)
    assert spans[0][0] == 0 and spans[-1][1] == len(text)
    assert all(a == b for (_, a), (b, _) in zip(spans, spans[1:]))
    assert all(0 < end - start <= SMALL.window_chars for start, end in spans)
    assert all(text[end - 2:end] == ". " for _, end in spans[:-1])


def test_a_text_without_breaks_is_cut_hard() -> None:
    assert cut("x" * 130, SMALL) == [(0, 60), (60, 120), (120, 130)]


def test_config_is_validated() -> None:
    with pytest.raises(ValueError, match="window_chars"):
        WindowConfig(min_chars=100, window_chars=10)
    with pytest.raises(ValueError, match="min_chars"):
        WindowConfig(min_chars=100, window_chars=200)


def _outputs(scores: list[float], hits: list[list[dict[str, object]]], evidence: list[list[dict[str, object]]],
             target: list[float]) -> dict[str, np.ndarray]:
    n = len(scores)
    out = {name: np.zeros((n, 1), np.float32) for name in contract.SCORE_OUTPUTS}
    out["VIOLENCE"] = np.array(scores, np.float32).reshape(n, 1)
    out[contract.MATCHES] = np.array([[json.dumps(h).encode()] for h in hits], dtype=object)
    out[contract.EVIDENCE] = np.array([[json.dumps(e).encode()] for e in evidence], dtype=object)
    out[contract.TARGET] = np.array(target, np.float32).reshape(n, 1)
    out.update({name: np.zeros((n, 1), np.float32) for name in contract.SUBCATEGORY_OUTPUTS})
    return out


def test_merge_takes_the_deciding_window_and_shifts_offsets() -> None:
    texts = ["short one", "a" * 130]
    window_plan = plan(texts, SMALL)
    assert window_plan.owners == (0, 1, 1, 1) and window_plan.offsets == (0, 0, 60, 120)
    hit = {"category": "violence", "term": "kill", "severity": 3, "start": 5, "end": 9, "text": "kill", "source": "rule:x"}
    span = {"category": "violence", "start": 2, "end": 20, "score": 0.9, "source": "head:sentence"}
    other = {"category": "violence", "start": 0, "end": 60, "score": 0.2, "source": "head:sentence"}
    out = merge(window_plan, _outputs([0.1, 0.2, 0.9, 0.3], [[], [], [hit], []], [[], [other], [span], []],
                                      [0.0, 0.0, 0.0, 1.0]), per_window_logit=0.0)
    violence = "VIOLENCE"
    assert out[violence][:, 0].tolist() == pytest.approx([0.1, 0.9])
    assert json.loads(out[contract.MATCHES][1, 0])[0]["start"] == 65
    evidence = json.loads(out[contract.EVIDENCE][1, 0])
    assert [(e["start"], e["end"]) for e in evidence] == [(62, 80)]
    assert out[contract.TARGET][:, 0].tolist() == [0.0, 1.0]


def test_a_subcategory_share_and_its_evidence_come_from_the_parent_categorys_deciding_window() -> None:
    window_plan = plan(["a" * 130], SMALL)  # windows at 0, 60, 120
    minors = {"category": "sexual/minors", "start": 1, "end": 3, "score": 1.0, "source": "minor_reference"}
    outputs = _outputs([0.9, 0.2, 0.3], [[]] * 3, [[], [minors], []], [0.0] * 3)
    outputs["SEXUAL"] = np.array([[0.1], [0.8], [0.2]], np.float32)
    outputs["VIOLENCE_THREAT"] = np.array([[0.7], [0.1], [0.95]], np.float32)  # the 0.95 is not violence's window
    outputs["VIOLENCE_GRAPHIC"] = np.array([[0.2], [0.9], [0.1]], np.float32)
    outputs["SEXUAL_MINORS"] = np.array([[0.0], [1.0], [0.0]], np.float32)
    out = merge(window_plan, outputs, per_window_logit=0.0)
    assert (float(out["VIOLENCE_THREAT"][0, 0]), float(out["VIOLENCE_GRAPHIC"][0, 0])) == pytest.approx((0.7, 0.2))
    assert float(out["SEXUAL_MINORS"][0, 0]) == 1.0
    assert [(e["category"], e["start"]) for e in json.loads(out[contract.EVIDENCE][0, 0])] == [("sexual/minors", 61)]


def test_a_reference_to_a_minor_in_any_window_counts_not_only_in_the_most_sexual_one() -> None:
    window_plan = plan(["a" * 130], SMALL)
    minors = {"category": "sexual/minors", "start": 1, "end": 3, "score": 1.0, "source": "minor_reference"}
    outputs = _outputs([0.0, 0.0, 0.0], [[]] * 3, [[minors], [], []], [0.0] * 3)
    outputs["SEXUAL"] = np.array([[0.1], [0.2], [0.9]], np.float32)  # explicit in the last window, the age in the first
    outputs["SEXUAL_MINORS"] = np.array([[1.0], [0.0], [0.0]], np.float32)
    out = merge(window_plan, outputs, per_window_logit=0.0)
    assert float(out["SEXUAL_MINORS"][0, 0]) == 1.0
    assert [(e["category"], e["start"]) for e in json.loads(out[contract.EVIDENCE][0, 0])] == [("sexual/minors", 1)]


def test_the_deciding_score_loses_odds_with_the_window_count() -> None:
    window_plan = plan(["a" * 130, "short"], SMALL)
    outputs = _outputs([0.5, 0.5, 0.5, 0.5], [[]] * 4, [[]] * 4, [0.0] * 4)
    out = merge(window_plan, outputs, per_window_logit=1.0)
    assert out["VIOLENCE"][:, 0].tolist() == pytest.approx([1 / 3 / (1 + 1 / 3), 0.5])  # odds 1 -> 1/3
    assert length_adjusted(0.99, 1, 1.0) == 0.99
    with pytest.raises(ValueError, match="per_window_logit"):
        WindowConfig(per_window_logit=-1)


def test_windowed_infer_batches_windows_within_the_limit() -> None:
    seen: list[int] = []

    def infer(texts: list[str]) -> dict[str, np.ndarray]:
        seen.append(len(texts))
        return _outputs([0.0] * len(texts), [[] for _ in texts], [[] for _ in texts], [0.0] * len(texts))

    out = windowed_infer(["b" * 1000, "c"], infer, max_batch_size=4, config=SMALL)
    assert max(seen) <= 4 and sum(seen) == 18
    assert out[contract.TARGET].shape == (2, 1)


def _by_letter(scores: dict[str, float], calls: list[list[str]]) -> Callable[[list[str]], dict[str, np.ndarray]]:
    """A model whose violence score for a window is `scores` of its first letter (0 when absent)."""
    def infer(texts: list[str]) -> dict[str, np.ndarray]:
        calls.append(list(texts))
        return _outputs([scores.get(t[:1], 0.0) for t in texts], [[] for _ in texts], [[] for _ in texts],
                        [0.0] * len(texts))
    return infer


def test_screened_infer_reads_only_the_most_suspicious_windows_of_a_long_text_with_the_expensive_model() -> None:
    long_text = "a" * 60 + "b" * 60 + "c" * 60 + "d" * 60 + "e" * 60  # five windows of SMALL
    cheap: list[list[str]] = []
    expensive: list[list[str]] = []
    out = screened_infer([long_text, "short"], _by_letter({"a": 0.9, "b": 0.1, "c": 0.2, "d": 0.7}, expensive),
                         _by_letter({"a": 0.1, "c": 0.8, "d": 0.3, "e": 0.05}, cheap), max_batch_size=4,
                         max_windows=2, config=SMALL)
    assert sorted(t[0] for batch in cheap for t in batch) == ["a", "b", "c", "d", "e"]  # the screen reads all
    assert sorted(t[0] for batch in expensive for t in batch) == ["c", "d", "s"]  # two of five, and the short text
    # windows c and d were re-read (0.2 and 0.7), a, b and e keep the screen's 0.1, 0.0 and 0.05: the max is d's
    assert _violence(out)[0] == pytest.approx(length_adjusted(0.7, 5, SMALL.per_window_logit))
    with pytest.raises(ValueError, match="max_windows"):
        screened_infer(["x"], _by_letter({}, []), _by_letter({}, []), max_batch_size=4, max_windows=0)


def test_screened_infer_ranks_a_window_with_a_hit_first_and_leaves_short_texts_to_the_expensive_model() -> None:
    calls: list[list[str]] = []

    def screen(texts: list[str]) -> dict[str, np.ndarray]:
        hit = {"category": "hate", "term": "x", "severity": 3, "start": 0, "end": 1, "text": "x", "source": "rule:x"}
        return _outputs([0.4 if t.startswith("a") else 0.0 for t in texts],
                        [[hit] if t.startswith("b") else [] for t in texts], [[] for _ in texts], [0.0] * len(texts))

    screened_infer(["a" * 60 + "b" * 60 + "c" * 60], _by_letter({}, calls), screen, max_batch_size=8, max_windows=1,
                   config=SMALL)
    assert [t[0] for batch in calls for t in batch] == ["b"]
    calls.clear()
    screened_infer(["a" * 60 + "b" * 60 + "c" * 60], _by_letter({}, calls), screen, max_batch_size=8, max_windows=3,
                   config=SMALL)
    assert [t[0] for batch in calls for t in batch] == ["a", "b", "c"]


def _violence(out: dict[str, np.ndarray]) -> np.ndarray:
    return out["VIOLENCE"][:, 0]


@pytest.mark.parametrize("which", ["fast", "semantic"])
def test_a_threat_inside_a_long_benign_text_is_found_and_is_the_evidence(
        which: str, text_model: TextModerationModel, semantic_model: TextSemanticModel) -> None:
    model = text_model if which == "fast" else semantic_model
    long_text = BENIGN * 4 + HARMFUL + " " + BENIGN * 4
    out = model.infer({"TEXT": np.array([[long_text.encode()], [(BENIGN * 8).encode()], [HARMFUL.encode()]],
                                        dtype=object)})
    scores = _violence(out)
    assert scores[0] >= 0.5 and scores[1] < 0.5
    assert scores[2] >= 0.5
    start = long_text.index(HARMFUL)
    spans = [e for e in json.loads(out[contract.EVIDENCE][0, 0]) if e["category"] == "violence"]
    assert spans and all(start - 400 <= e["start"] and e["end"] <= start + len(HARMFUL) + 400 for e in spans)
    assert any(e["start"] <= start + len(HARMFUL) and e["end"] >= start for e in spans)


def test_minilm_reads_a_bounded_number_of_windows_of_a_maximum_length_text_and_still_finds_the_threat(
        semantic_model: TextSemanticModel, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 20,000-character text (the router's limit) costs MiniLM SEMANTIC_MAX_WINDOWS windows, not 50: a
    flood of such texts cannot buy the accurate profile's whole CPU, and the threat is still the evidence."""
    embedder = semantic_model._embedder
    read: list[int] = []
    real = embedder.embed

    def counting(texts: list[str]) -> object:
        read.append(len(texts))
        return real(texts)

    monkeypatch.setattr(embedder, "embed", counting)
    long_text = (BENIGN * 60)[:9_000] + " " + HARMFUL + " " + (BENIGN * 60)[:10_900]
    assert len(long_text) > 19_900 and len(cut(long_text)) > 40
    out = semantic_model.infer({"TEXT": np.array([[long_text.encode()]], dtype=object)})
    assert sum(read) == SEMANTIC_MAX_WINDOWS
    assert _violence(out)[0] >= 0.5
    start = long_text.index(HARMFUL)
    spans = [e for e in json.loads(out[contract.EVIDENCE][0, 0]) if e["category"] == "violence"]
    assert any(e["start"] <= start + len(HARMFUL) and e["end"] >= start for e in spans)
