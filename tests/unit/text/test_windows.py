"""Long texts read in windows (services/text/windows.py): the pure cut and merge, then both models."""

from __future__ import annotations

import json

import numpy as np
import pytest

from services.common.contracts import text as contract
from services.text.model import TextModerationModel
from services.text.semantic import TextSemanticModel
from services.text.windows import WindowConfig, cut, length_adjusted, merge, plan, windowed_infer

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
