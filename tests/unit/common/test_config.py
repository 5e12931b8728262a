"""Config loading: errors name the file and the key; env overrides; every shipped config loads."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.common.config import ConfigError, load_yaml_file
from services.common.serving.modality_config import ModalityServiceConfig, load_service_config
from services.router.config import RouterConfig, load_router_config

ROOT = Path(__file__).resolve().parents[3]


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "svc.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("text, key, problem", [
    ("service: text\nbatching: {max_batch_size: 0}\n", "batching", "max_batch_size must be >= 1"),
    ("service: text\nbatching: {max_batch_sise: 4}\n", "batching.max_batch_sise", "unknown key"),
    ("service: text\nonnxruntime: {intra_op_threads: two}\n", "onnxruntime.intra_op_threads", "expected int"),
    ("service: audio\n", "<top level>", "service must be text, vision, ocr or match"),
    ("server: {listen: nowhere}\nservice: ocr\n", "server", "listen must be host:port"),
    ("batching: {}\n", "service", "required key is missing"),
    ("service: [text\n", "line 2", "invalid YAML"),
])
def test_errors_name_file_and_key(tmp_path: Path, text: str, key: str, problem: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_yaml_file(path, ModalityServiceConfig)
    message = str(caught.value)
    assert message.startswith(f"{path}: {key}")
    assert problem in message


def test_env_overrides_listen_and_repository(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, "service: vision\n")
    monkeypatch.setenv("AUDITMESH_LISTEN", "0.0.0.0:9000")
    monkeypatch.setenv("AUDITMESH_MODEL_REPOSITORY", "/models")
    config = load_service_config(path)
    assert config.server.listen == "0.0.0.0:9000"
    assert config.model_repository == "/models"


@pytest.mark.parametrize("service", ["text", "vision", "ocr"])
def test_shipped_service_configs_load(service: str) -> None:
    config = load_yaml_file(ROOT / "config" / f"{service}.yaml", ModalityServiceConfig)
    assert config.service == service
    assert config.onnxruntime.intra_op_threads == 1


def test_shipped_router_config_loads_with_all_upstreams(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUDITMESH_OCR_URL", "ocr:8103")
    config = load_router_config(ROOT / "config" / "router.yaml")
    assert isinstance(config, RouterConfig)
    assert config.upstreams["ocr"].url == "ocr:8103"
    assert config.upstreams["text"].model == "text_moderation"


def test_the_bank_store_follows_the_postgres_dsn_unless_a_file_is_named(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    dsn = "postgresql://auditmesh:pw@db:5432/auditmesh"
    config = load_router_config(ROOT / "config" / "router.yaml")
    assert not config.lifecycle.banks_in_postgres and config.lifecycle.banks_file == "var/banks.sqlite"
    monkeypatch.setenv("AUDITMESH_POSTGRES_DSN", dsn)
    shared = load_router_config(ROOT / "config" / "router.yaml").lifecycle
    assert shared.banks_in_postgres and shared.banks_file is None
    monkeypatch.setenv("AUDITMESH_BANKS_PATH", str(tmp_path / "banks.sqlite"))
    named = load_router_config(ROOT / "config" / "router.yaml").lifecycle
    assert not named.banks_in_postgres and named.banks_file == str(tmp_path / "banks.sqlite")
    monkeypatch.setenv("AUDITMESH_BANKS_PATH", "off")
    off = load_router_config(ROOT / "config" / "router.yaml").lifecycle
    assert not off.banks_in_postgres and off.banks_file is None
    # the match service: its DSN from the environment, never in a repr
    monkeypatch.setenv("AUDITMESH_BANKS_DSN", dsn)
    match = load_service_config(ROOT / "config" / "match.yaml")
    assert match.match.banks_dsn == dsn and "pw@" not in repr(match) and match.match.store_location == \
        "postgresql auditmesh@db:5432/auditmesh"
