"""A tenant classifier trained with `auditmesh classifier train` is served by a real text service process
(KServe v2 over gRPC on loopback) beside the text models, as `classifier.<tenant>` at its version."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as triton

from services.common.contracts.classifier import decode_scores
from services.launcher import ROOT, Mesh, free_base_port
from services.trainer.commands import train_from_file
from tests.stubs import MeshTritonClient
from tests.unit.trainer.conftest import labelled

pytestmark = pytest.mark.slow


def test_the_text_service_serves_a_trained_tenant_classifier(tmp_path: Path) -> None:
    examples = tmp_path / "labels.jsonl"
    examples.write_text("".join(json.dumps({"text": e.text, "labels": dict(e.labels)}) + "\n" for e in labelled(240)),
                        encoding="utf-8")
    summary = train_from_file(examples, tenant="acme", out=tmp_path / "classifiers" / "acme", nice=0)
    config = tmp_path / "config"
    shutil.copytree(ROOT / "config", config)
    text_yaml = (config / "text.yaml").read_text(encoding="utf-8")
    assert 'tenant_classifiers: ""' in text_yaml
    (config / "text.yaml").write_text(text_yaml.replace('tenant_classifiers: ""',
                                                        f"tenant_classifiers: {tmp_path / 'classifiers'}"),
                                      encoding="utf-8")
    text = Mesh(base_port=free_base_port(), config_dir=config)
    text.start_service("text")
    try:
        text.wait_serving("text", 120.0)
        client = MeshTritonClient(triton.InferenceServerClient(text.address("text")), text.internal_metadata())
        assert client.get_model_metadata("classifier.acme").versions == [summary["version"]]
        tensor = triton.InferInput("TEXT", [2, 1], "BYTES")
        tensor.set_data_from_numpy(np.array([[b"claim free crypto airdrop token dm"], [b"see you at lunch tomorrow"]],
                                            dtype=object))
        scores = client.infer("classifier.acme", [tensor]).as_numpy("SCORES")
        rows = [decode_scores(value[0]) for value in scores]
        assert [r["custom.crypto_scam"][1] for r in rows] == [True, False]
        assert client.is_model_ready("text_moderation")  # the text models are served beside it
    finally:
        text.stop()
