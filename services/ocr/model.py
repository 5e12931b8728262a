"""`OcrModel`: the OCR pipeline as a KServe served model (see services.common.serving.model_api).

Tensors (first dimension N = batch)::

    IMAGE  BYTES [N, 1]  encoded JPEG / PNG / WebP
    LINES  BYTES [N, 1]  UTF-8 JSON list of {"text", "confidence", "polygon": [[x, y] * 4]}
    ERROR  BYTES [N, 1]  b"" when the image was read, else why it was rejected

A rejected image (undecodable, too large, wrong format) gets LINES = b"[]" and its reason in ERROR;
it is left out of the batch and never fails the other images.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Mapping, Sequence

import cv2
import numpy as np
from PIL import Image

from services.common.image_decode import ImageLimits, decode_rgb
from services.common.errors import ImageRejectedError
from services.common.contracts import ocr as contract
from services.common.contracts.tensors import TensorSpec
from services.common.serving.model_api import ModelFile
from services.common.errors import InvalidInputError
from services.common.serving.model_repository import RepositoryEntry, find_model
from services.common.serving.onnx_session import SessionOptions, create_session
from services.ocr.pipeline import OcrPipeline
from services.ocr.settings import OcrSettings

# Repository models behind this served model: detector, angle classifier, recogniser.
MODEL_VERSIONS = {"ppocr_det": "1", "ppocr_cls": "1", "ppocr_rec": "1"}


def _warmup_png() -> bytes:
    # Hershey text needs no font file; it yields boxes so the classifier and recogniser run too.
    canvas = np.full((480, 640, 3), 255, dtype=np.uint8)
    cv2.putText(canvas, "warmup 2026", (40, 80), cv2.FONT_HERSHEY_SIMPLEX, 1.0, (0, 0, 0), 2)
    buffer = io.BytesIO()
    Image.fromarray(canvas).save(buffer, format="PNG")
    return buffer.getvalue()


class OcrModel:
    """Reads text in images, a batch at a time.

    Example::

        model = OcrModel(Path("model_repository"), SessionOptions(intra_op_threads=1))
        out = model.infer({"IMAGE": np.array([[png_bytes]], dtype=object)})
        json.loads(out["LINES"][0, 0])   # [{"text": "Hello world 2026", "confidence": 0.9997, "polygon": [...]}]
    """

    name = "ocr"
    version = "1"
    platform = "auditmesh_ocr_pipeline"
    max_batch_size = 8
    #: Images `warmup` runs (services.common.serving.kserve_servicer.measure_warm).
    warmup_items = 1
    inputs: Sequence[TensorSpec] = (contract.INPUT,)
    outputs: Sequence[TensorSpec] = contract.OUTPUTS

    def __init__(self, repository_root: Path, session_options: SessionOptions,
                 settings: OcrSettings = OcrSettings(), limits: ImageLimits = ImageLimits()) -> None:
        self._entries: dict[str, RepositoryEntry] = {
            name: find_model(name, version, repository_root) for name, version in MODEL_VERSIONS.items()}
        det, cls, rec = (create_session(str(entry.path), session_options) for entry in self._entries.values())
        self._pipeline = OcrPipeline(det, cls, rec, settings)
        self._limits = limits

    def infer(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Read every image of the batch; see the module docstring for the tensors."""
        items = self._image_column(inputs)
        errors: list[bytes] = [b""] * len(items)
        decoded: dict[int, np.ndarray] = {}
        for index, data in enumerate(items):
            try:
                if not isinstance(data, bytes):
                    raise ImageRejectedError(f"IMAGE element is {type(data).__name__}, expected encoded image bytes")
                decoded[index] = decode_rgb(data, self._limits)
            except ImageRejectedError as exc:
                errors[index] = str(exc).encode("utf-8")
        read = dict(zip(decoded, self._pipeline.run(list(decoded.values()))))
        lines = [contract.encode_lines(read.get(index, [])) for index in range(len(items))]
        return {"LINES": np.array(lines, dtype=object).reshape(-1, 1),
                "ERROR": np.array(errors, dtype=object).reshape(-1, 1)}

    def warmup(self) -> None:
        """Run one synthetic text image through decode, detection, classification and recognition."""
        self.infer({"IMAGE": np.array([[_warmup_png()]], dtype=object)})

    def model_files(self) -> Sequence[ModelFile]:
        """The three ONNX files (detector, angle classifier, recogniser) from the repository."""
        return [ModelFile(e.name, e.version, str(e.path), e.sha256, e.source, e.license) for e in self._entries.values()]

    def _image_column(self, inputs: Mapping[str, np.ndarray]) -> list[object]:
        if "IMAGE" not in inputs:
            raise InvalidInputError(f"input IMAGE is missing (got {sorted(inputs)}); send BYTES [N, 1] encoded images")
        array = inputs["IMAGE"]
        if not isinstance(array, np.ndarray) or array.ndim != 2 or array.shape[1] != 1:
            shape = getattr(array, "shape", None)
            raise InvalidInputError(f"input IMAGE must have shape [N, 1], got {shape}")
        if array.shape[0] > self.max_batch_size:
            raise InvalidInputError(f"input IMAGE has {array.shape[0]} items; max_batch_size is {self.max_batch_size}")
        return list(array[:, 0])

