"""Tests for services/text/tenant_classifier.py: a trained tenant classifier served under the KServe
contract of services/common/contracts/classifier.py, with the real multilingual encoder."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from services.common.contracts.classifier import decode_scores, encode_scores, model_name, parse_model_name
from services.common.errors import InvalidInputError
from services.common.serving.model_api import ServedModel
from services.text.multilingual import MultilingualEncoder
from services.text.tenant_classifier import TenantClassifierModel
from services.trainer.artifact import ArtifactError, digest, save
from services.trainer.train import TrainConfig, train
from tests.unit.trainer.conftest import labelled


@pytest.fixture(scope="module")
def encoder() -> MultilingualEncoder:
    return MultilingualEncoder(threads=1)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, encoder: MultilingualEncoder) -> TenantClassifierModel:
    examples = labelled(240)
    trained = train(examples, encoder=encoder, config=TrainConfig(curve=(), max_terms=2_000))
    path = save(trained, tmp_path_factory.mktemp("classifiers") / "acme", tenant="acme",
                examples_digest=digest(examples))
    return TenantClassifierModel(path, encoder)


def test_the_classifier_is_a_kserve_model_named_for_its_tenant_and_versioned(served: TenantClassifierModel) -> None:
    model: ServedModel = served
    assert model.name == f"classifier.acme.{served.classifier.version}" and model.version == served.classifier.version
    assert [s.name for s in model.inputs] == ["TEXT"] and [s.name for s in model.outputs] == ["SCORES"]
    files = model.model_files()
    assert files[0].name == model.name and files[0].sha256 == served.classifier.manifest["heads_sha256"]
    assert served.categories == ("custom.crypto_scam", "spam")


def test_a_batch_is_scored_per_text_in_order(served: TenantClassifierModel) -> None:
    texts = [b"claim free crypto airdrop token dm wallet", b"see you at lunch tomorrow at school", b"coffee garden movie"]
    out = served.infer({"TEXT": np.array([[t] for t in texts], dtype=object)})
    assert out["SCORES"].shape == (3, 1)
    rows = [decode_scores(out["SCORES"][i, 0]) for i in range(3)]
    assert [r["custom.crypto_scam"][1] for r in rows] == [True, False, False]
    assert rows[0]["custom.crypto_scam"][0] > 0.5 > rows[1]["custom.crypto_scam"][0]
    assert served.infer({"TEXT": np.zeros((0, 1), dtype=object)})["SCORES"].shape == (0, 1)
    served.warmup()


def test_bad_input_and_a_broken_directory_are_refused(served: TenantClassifierModel, tmp_path: Path,
                                                      encoder: MultilingualEncoder) -> None:
    with pytest.raises(InvalidInputError, match="TEXT"):
        served.infer({"TEXT": np.array([["not bytes"]], dtype=object)})
    with pytest.raises(ArtifactError, match="cannot read"):
        TenantClassifierModel(tmp_path / "missing", encoder)


def test_the_contract_names_and_rows() -> None:
    assert model_name("acme-eu_1", "68b7e413a4f1") == "classifier.acme-eu_1.68b7e413a4f1"
    with pytest.raises(ValueError, match="tenant"):
        model_name("../etc", "68b7e413a4f1")
    with pytest.raises(ValueError, match="version"):
        model_name("acme", "LATEST")
    assert parse_model_name("classifier.acme-eu_1.68b7e413a4f1") == ("acme-eu_1", "68b7e413a4f1")
    assert parse_model_name("classifier.acme") is None and parse_model_name("text_moderation") is None
    assert decode_scores(encode_scores({"hate": 0.25}, {"hate": False})) == {"hate": (0.25, False)}
    with pytest.raises(ValueError, match="SCORES"):
        decode_scores(b"[1, 2]")


def test_the_text_service_serves_every_classifier_in_its_folder_and_skips_broken_ones(
        served: TenantClassifierModel, tmp_path: Path, encoder: MultilingualEncoder) -> None:
    import shutil

    from services.common.serving.modality_config import ModalityServiceConfig
    from services.text.server import tenant_classifier_models

    folder = tmp_path / "classifiers"
    shutil.copytree(served.directory, folder / "acme" / served.version)  # what `train --into` writes
    (folder / "notes").mkdir()  # a directory without classifier.json is not a classifier
    assert [m.name for m in tenant_classifier_models(folder, encoder)] == [served.name]
    shutil.copytree(served.directory, folder / "acme-copy")  # the same version twice: served once
    broken = folder / "globex" / "0123456789ab"
    shutil.copytree(served.directory, broken)
    (broken / "heads.npz").write_bytes(b"truncated")  # a half-written or altered directory
    partial = folder / "acme" / ".0ddba11.partial-x"  # one being written right now
    shutil.copytree(served.directory, partial)
    assert [m.name for m in tenant_classifier_models(folder, encoder)] == [served.name]  # never stops the service
    assert tenant_classifier_models(tmp_path / "missing" / "classifiers", encoder) == []  # created, empty
    assert (tmp_path / "missing" / "classifiers").is_dir()
    (tmp_path / "a-file").write_text("not a folder")
    with pytest.raises(ValueError, match="is not a directory"):
        tenant_classifier_models(tmp_path / "a-file", encoder)
    with pytest.raises(ValueError, match="only the text service"):
        ModalityServiceConfig(service="vision", tenant_classifiers=str(folder))


def test_repository_model_load_builds_a_tenants_classifier_version_from_the_folder_as_it_is_now(
        served: TenantClassifierModel, tmp_path: Path, encoder: MultilingualEncoder) -> None:
    import shutil
    from types import SimpleNamespace

    from services.common.errors import NotFoundError
    from services.common.serving.modality_config import ModalityServiceConfig
    from services.text.server import load_tenant_classifier

    folder = tmp_path / "classifiers"
    folder.mkdir()
    config = ModalityServiceConfig(service="text", tenant_classifiers=str(folder))
    serving = {"text_moderation": SimpleNamespace(multilingual_encoder=encoder)}
    name = served.name
    assert load_tenant_classifier(config, "text_moderation", serving) is None  # not its kind: the usual reload
    with pytest.raises(NotFoundError, match=f"no classifier of tenant 'acme' at version {served.version}"):
        load_tenant_classifier(config, name, serving)
    with pytest.raises(NotFoundError, match="classifier.<tenant>.<version>"):
        load_tenant_classifier(config, "classifier.acme", serving)
    (folder / "globex").mkdir()
    (folder / "globex" / "classifier.json").write_text("{not json")  # another tenant's broken manifest
    shutil.copytree(served.directory, folder / "trained-after-start")  # any directory name: the manifest says whose
    model = load_tenant_classifier(config, name, serving)
    assert model is not None and (model.name, model.version) == (name, served.version)
    with pytest.raises(NotFoundError, match="text_moderation is not serving"):
        load_tenant_classifier(config, name, {})
    with pytest.raises(NotFoundError, match="serves no tenant classifiers"):
        load_tenant_classifier(ModalityServiceConfig(service="text"), name, serving)


def test_saving_is_atomic_and_versioned_directories_never_overwrite(served: TenantClassifierModel, tmp_path: Path) -> None:
    from services.trainer.artifact import load, save_into
    from services.trainer.train import TrainConfig, train
    from services.trainer.artifact import digest

    examples = labelled(240)
    trained = train(examples, encoder=served.encoder, config=TrainConfig(curve=(), max_terms=2_000))
    first = save_into(trained, tmp_path, tenant="acme", examples_digest=digest(examples))
    assert first == tmp_path / "acme" / served.version and load(first).version == served.version
    again = save_into(trained, tmp_path, tenant="acme", examples_digest=digest(examples))
    assert again == first and sorted(p.name for p in (tmp_path / "acme").iterdir()) == [served.version]  # no partials left
