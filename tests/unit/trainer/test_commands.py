"""The `auditmesh classifier` commands end to end with the real multilingual encoder: a labelled JSONL
file in, a classifier directory out, texts scored with it; a bad file is refused with its line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from services.cli import main
from tests.unit.trainer.conftest import labelled


def test_train_score_and_evaluate_from_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    examples = tmp_path / "labels.jsonl"
    examples.write_text("".join(json.dumps({"text": e.text, "labels": dict(e.labels)}) + "\n" for e in labelled(240)),
                        encoding="utf-8")
    out = tmp_path / "acme"
    assert main(["classifier", "train", "--examples", str(examples), "--tenant", "acme", "--out", str(out),
                 "--nice", "0"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["tenant"] == "acme" and summary["examples"] == 240
    assert summary["categories"]["custom.crypto_scam"]["held_out"]["f1"] >= 0.9
    assert main(["classifier", "score", "--classifier", str(out), "--text", "claim free crypto airdrop token dm",
                 "--text", "see you at lunch tomorrow"]) == 0
    scored = json.loads(capsys.readouterr().out)
    assert [t["categories"]["custom.crypto_scam"]["flagged"] for t in scored["texts"]] == [True, False]
    assert scored["version"] == summary["version"]
    test = tmp_path / "test.jsonl"
    test.write_text("".join(json.dumps({"text": e.text, "labels": dict(e.labels)}) + "\n" for e in labelled(90, seed=5)),
                    encoding="utf-8")
    assert main(["classifier", "evaluate", "--classifier", str(out), "--examples", str(test)]) == 0
    evaluated = json.loads(capsys.readouterr().out)["categories"]["custom.crypto_scam"]
    assert (evaluated["rows"], evaluated["positives"]) == (90, 30) and evaluated["f1"] >= 0.9
    assert evaluated["accuracy"] >= 0.9


def test_a_bad_file_is_refused_with_its_line_and_exit_status_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    examples = tmp_path / "labels.jsonl"
    examples.write_text('{"text": "hi", "labels": {"spam": 0}}\n{"text": "x", "labels": {"spam": "yes"}}\n',
                        encoding="utf-8")
    assert main(["classifier", "train", "--examples", str(examples), "--tenant", "acme", "--out",
                 str(tmp_path / "out"), "--nice", "0"]) == 2
    assert "labels.jsonl:2: labels.spam: must be 1 or 0, got 'yes'" in capsys.readouterr().err
