"""Tests for services/trainer/artifact.py: a saved classifier loads back and scores as trained; its
version follows its inputs; an altered or foreign artifact is refused naming the file."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from services.trainer.artifact import ArtifactError, digest, load, save
from services.trainer.examples import Example
from services.trainer.features import Featurizer
from services.trainer.train import TrainConfig, train
from tests.stubs import WordHashEncoder

CONFIG = TrainConfig(curve=(40,), max_terms=1_000)


def test_a_saved_classifier_scores_exactly_as_trained_and_records_its_metrics(tmp_path: Path,
                                                                              examples: list[Example]) -> None:
    encoder = WordHashEncoder()
    trained = train(examples, encoder=encoder, config=CONFIG)
    path = save(trained, tmp_path / "acme", tenant="acme", examples_digest=digest(examples))
    loaded = load(path)
    texts = ["free crypto airdrop claim now", "see you at lunch tomorrow"]
    rows = Featurizer(encoder, trained.grams).rows(texts)
    for category, head in trained.heads.items():
        assert np.allclose(loaded.probabilities(texts, encoder)[category], head.probability(rows), atol=1e-5)
    assert loaded.flagged(texts, encoder)["custom.crypto_scam"].tolist() == [True, False]
    metrics = loaded.manifest["metrics"]["custom.crypto_scam"]
    assert metrics["held_out"]["f1"] == trained.heads["custom.crypto_scam"].held_out.f1 and metrics["curve"]
    assert loaded.tenant == "acme" and len(loaded.version) == 12


def test_the_version_is_the_same_for_the_same_inputs_and_differs_for_others(tmp_path: Path,
                                                                         examples: list[Example]) -> None:
    trained = train(examples, encoder=WordHashEncoder(), config=CONFIG)
    first = load(save(trained, tmp_path / "a", tenant="acme", examples_digest=digest(examples))).version
    again = load(save(trained, tmp_path / "b", tenant="acme", examples_digest=digest(examples))).version
    other = load(save(trained, tmp_path / "c", tenant="acme", examples_digest=digest(examples[1:]))).version
    assert first == again != other


def test_an_altered_truncated_or_foreign_artifact_is_refused(tmp_path: Path, examples: list[Example]) -> None:
    trained = train(examples, encoder=WordHashEncoder(), config=CONFIG)
    path = save(trained, tmp_path / "acme", tenant="acme", examples_digest=digest(examples))
    heads = path / "heads.npz"
    heads.write_bytes(heads.read_bytes()[:-10])
    with pytest.raises(ArtifactError, match="heads.npz: SHA-256 differs"):
        load(path)
    path = save(trained, tmp_path / "acme", tenant="acme", examples_digest=digest(examples))
    manifest = json.loads((path / "classifier.json").read_text(encoding="utf-8"))
    (path / "classifier.json").write_text(json.dumps({**manifest, "encoder": "another==1.0"}), encoding="utf-8")
    with pytest.raises(ArtifactError, match="trained with encoder 'another==1.0'"):
        load(path)
    with pytest.raises(ArtifactError, match="cannot read"):
        load(tmp_path / "missing")
