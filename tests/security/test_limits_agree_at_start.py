"""Issue 12 item 1: the limits must agree end to end, checked at start. The router's per-item limits
must fit what each modality service accepts (its `limits` in config/<modality>.yaml, the one source
of truth); otherwise the router refuses to start with an error naming the file and the key, instead
of sending items the service will refuse (which the policy then answered fail-open)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from services.launcher import ROOT


def config_copy(tmp_path: Path) -> Path:
    target = tmp_path / "config"
    shutil.copytree(ROOT / "config", target)
    return target


def edit(path: Path, section: str, **values: object) -> None:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data.setdefault(section, {}).update(values)
    path.write_text(yaml.safe_dump(data), encoding="utf-8")


def start_router(config: Path) -> tuple[int, str]:
    """Start the router on `config` (a free port, state in the copy); its exit code and stderr. A router
    that starts serves until killed: the timeout fails the test."""
    env = {**os.environ, "AUDITMESH_LISTEN": "127.0.0.1:0", "AUDITMESH_METRICS_LISTEN": "off",
           "AUDITMESH_POLICY_STORE": str(config / "store.sqlite"), "AUDITMESH_AUDIT_LOG": str(config / "audit.sqlite")}
    done = subprocess.run([sys.executable, "-m", "services.router", "--config", str(config / "router.yaml")], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=30)
    return done.returncode, done.stderr


def test_an_image_limit_the_vision_service_cannot_take_stops_the_router(tmp_path: Path) -> None:
    config = config_copy(tmp_path)
    edit(config / "vision.yaml", "limits", max_row_bytes=4 * 1024 * 1024)
    code, err = start_router(config)
    assert code == 2
    assert "vision.yaml" in err and "limits.max_row_bytes" in err and "max_image_bytes" in err, err


def test_a_text_limit_the_text_service_cannot_take_stops_the_router(tmp_path: Path) -> None:
    config = config_copy(tmp_path)
    edit(config / "router.yaml", "limits", max_text_chars=1_000_000)
    code, err = start_router(config)
    assert code == 2
    assert "text.yaml" in err and "max_text_chars" in err, err


def test_batches_larger_than_the_service_takes_stop_the_router(tmp_path: Path) -> None:
    config = config_copy(tmp_path)
    edit(config / "ocr.yaml", "limits", max_rows=4)
    code, err = start_router(config)
    assert code == 2
    assert "router.yaml" in err and "upstreams.ocr.scheduling.max_batch_size" in err and "ocr.yaml" in err, err
