"""The two ONNX networks behind `image_safety`, opened from the model repository and checked against it.

Each network's config.json (written by `build_models.py`) names its tensors, its class order, the
preprocessing recipe it was installed for and its score calibration. Loading refuses a repository
whose recipe id or tensor names differ from what this code implements, so a stale repository fails
at start-up rather than producing quietly wrong scores.

Example::

    network = load_network(Path("model_repository"), OPENNSFW, SessionOptions(intra_op_threads=1))
    network.run([rgb_a, rgb_b]).shape   # (2, 2): (sfw, nsfw) per image
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import onnxruntime as ort

from services.common.serving.model_repository import RepositoryEntry, find_model
from services.common.serving.onnx_session import SessionOptions, create_session
from services.vision.calibration import ScoreCalibration
from services.vision.preprocess import (IMAGE_SAFETY_PREPROCESS_ID, OPENNSFW_PREPROCESS_ID, image_safety_tensor,
                                        opennsfw_tensor, stack)


class RepositoryMismatchError(ValueError):
    """The repository's config.json does not describe the model this code expects (rebuild it with
    `python -m services.vision.build.build_models`)."""


class ModelOutputError(RuntimeError):
    """An ONNX session returned an output of the wrong shape (a bug or a wrong file, not bad input)."""


@dataclass(frozen=True)
class NetworkSpec:
    """Which repository model to open and the preprocessing this code applies to it."""

    name: str
    version: str
    preprocess_id: str
    preprocess: Callable[[np.ndarray], np.ndarray]


OPENNSFW = NetworkSpec("opennsfw", "1", OPENNSFW_PREPROCESS_ID, opennsfw_tensor)
IMAGE_SAFETY_S = NetworkSpec("image_safety_s", "1", IMAGE_SAFETY_PREPROCESS_ID, image_safety_tensor)


@dataclass(frozen=True)
class Network:
    """One opened ONNX model: session, tensor names, class order, preprocessing and calibration."""

    entry: RepositoryEntry
    session: ort.InferenceSession
    input_name: str
    output_name: str
    classes: tuple[str, ...]
    preprocess: Callable[[np.ndarray], np.ndarray]
    calibration: ScoreCalibration

    def run(self, images: Sequence[np.ndarray]) -> np.ndarray:
        """Class probabilities, float32 (len(images), len(classes)), from a single session.run.

        Example::

            network.run([decode_rgb(jpeg)])   # array([[0.99997, 0.00003]], dtype=float32)
        """
        batch = stack([self.preprocess(image) for image in images])
        (probs,) = self.session.run([self.output_name], {self.input_name: batch})
        probs = np.asarray(probs, dtype=np.float32)
        if probs.shape != (len(images), len(self.classes)):
            raise ModelOutputError(f"{self.entry.name}: output {self.output_name} has shape {probs.shape}, "
                                   f"expected {(len(images), len(self.classes))}")
        return probs


def load_network(root: Path, spec: NetworkSpec, options: SessionOptions) -> Network:
    """Open `spec`'s model from the repository at `root`.

    Raises ModelNotFoundError if it is missing, RepositoryMismatchError if its config.json or tensors
    differ from what this code expects.
    """
    entry = find_model(spec.name, spec.version, root)
    extra = entry.extra
    config_path = root / spec.name / "config.json"
    try:
        input_name, output_name = str(extra["inputs"][0]["name"]), str(extra["outputs"][0]["name"])
        classes, calibration = tuple(extra["classes"]), ScoreCalibration.from_config(extra["calibration"])
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise RepositoryMismatchError(f"{config_path} is incomplete ({exc}); rebuild the repository") from None
    if extra.get("preprocess") != spec.preprocess_id:
        raise RepositoryMismatchError(f"{config_path} preprocess is {extra.get('preprocess')!r}, this code implements "
                                      f"{spec.preprocess_id!r}; rebuild the repository")
    session = create_session(str(entry.path), options)
    found = ([i.name for i in session.get_inputs()], [o.name for o in session.get_outputs()])
    if found != ([input_name], [output_name]):
        raise RepositoryMismatchError(f"{entry.path}: tensors {found}, {config_path} says {([input_name], [output_name])}")
    return Network(entry, session, input_name, output_name, classes, spec.preprocess, calibration)
