"""Execution providers of a modality service's ONNX sessions (`onnxruntime.providers`, env
AUDITMESH_ORT_PROVIDERS: what the CUDA image sets): validated names, the env override, and a provider
this onnxruntime build lacks skipped with a warning, CPU as the last resort."""

from __future__ import annotations

import logging

import pytest

from services.common.config import ConfigError
from services.common.serving.modality_config import ENV_ORT_PROVIDERS, OrtConfig, load_service_config
from services.common.serving.onnx_session import SessionOptions, create_session
from services.launcher import ROOT


def test_provider_names_are_validated() -> None:
    assert OrtConfig().providers == ("CPUExecutionProvider",)
    assert OrtConfig(providers=("CUDAExecutionProvider", "CPUExecutionProvider")).session_options().providers[0] == "CUDAExecutionProvider"
    with pytest.raises(ValueError, match="unknown: \\['CUDA'\\]"):
        OrtConfig(providers=("CUDA",))
    with pytest.raises(ValueError, match="none given"):
        OrtConfig(providers=())


def test_the_environment_sets_the_providers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_ORT_PROVIDERS, "CUDAExecutionProvider, CPUExecutionProvider")
    config = load_service_config(ROOT / "config" / "text.yaml")
    assert config.onnxruntime.providers == ("CUDAExecutionProvider", "CPUExecutionProvider")
    monkeypatch.setenv(ENV_ORT_PROVIDERS, "GPU")
    with pytest.raises(ConfigError, match="AUDITMESH_ORT_PROVIDERS.*unknown: \\['GPU'\\]"):
        load_service_config(ROOT / "config" / "vision.yaml")


def test_a_missing_provider_falls_back_to_the_cpu_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    models = sorted((ROOT / "model_repository").glob("*/1/model.onnx"))
    assert models, "model repository missing: run `make models`"
    with caplog.at_level(logging.WARNING):
        session = create_session(str(models[0]), SessionOptions(providers=("CUDAExecutionProvider", "CPUExecutionProvider")))
    assert session.get_providers() == ["CPUExecutionProvider"]
    assert "CUDAExecutionProvider" in caplog.text
