"""Batched line classification (0/180 degrees) and recognition (CTC) over all lines of a batch.

Lines from every image of a batch are pooled. The classifier's input has a fixed size (48x192), so
its chunks are simply `cls_batch` lines. The recogniser's input width follows the line: each line is
given its own width at height 48 rounded up to `width_step` pixels (at least 320), and lines of equal
width share a run, `rec_batch` at a time. rapidocr instead pads up to 6 lines of one image to the
widest of them; padding a short line to a long one changes what the model reads (a space next to CJK
text is dropped) and costs time (the recogniser's cost grows with width, not per run). With
per-line widths a line reads the same whatever else is in the batch.

Resizing, normalisation and decoding are rapidocr's own: `TextClassifier.resize_norm_img`,
`TextRecognizer.resize_norm_img`, `ClsPostProcess`, `CTCLabelDecode`.
"""

from __future__ import annotations

import math
from typing import Sequence

import cv2
import numpy as np
import onnxruntime as ort
from rapidocr.ch_ppocr_cls.main import TextClassifier
from rapidocr.ch_ppocr_cls.utils import ClsPostProcess
from rapidocr.ch_ppocr_rec.main import TextRecognizer
from rapidocr.ch_ppocr_rec.utils import CTCLabelDecode

CLS_IMAGE_SHAPE = (3, 48, 192)  # ch_ppocr_mobile_v2.0_cls (rapidocr's PP-OCRv4 cls shape)
CLS_LABELS = ("0", "180")
REC_IMAGE_SHAPE = (3, 48, 320)  # PP-OCRv6 rec: height 48, minimum width 320
CHARACTER_KEY = "character"  # ONNX metadata key holding the recogniser's dictionary, one per line


def input_width(crop_shape: tuple[int, ...], step: int) -> int:
    """Recogniser input width for a crop: its width scaled to height 48, rounded up to a multiple of
    `step`, at least 320 (step=1 is the width rapidocr gives a line recognised on its own).

    Example::

        input_width((30, 400), 32)   # 640: 400 * 48 / 30 = 640
    """
    _channels, height, min_width = REC_IMAGE_SHAPE
    natural = int(height * crop_shape[1] / float(crop_shape[0]))
    return max(min_width, step * math.ceil(natural / step))


def chunks_by_width(widths: Sequence[int], size: int) -> list[tuple[int, list[int]]]:
    """Group indices by equal input width (narrowest first), each group cut into chunks of at most `size`.

    Example::

        chunks_by_width([320, 640, 320, 320], 2)   # [(320, [0, 2]), (320, [3]), (640, [1])]
    """
    groups: dict[int, list[int]] = {}
    for index, width in enumerate(widths):
        groups.setdefault(width, []).append(index)
    return [(width, group[start : start + size]) for width, group in sorted(groups.items())
            for start in range(0, len(group), size)]


class AngleClassifier:
    """Turns upside-down line crops upright.

    Example::

        upright = AngleClassifier(create_session(".../ppocr_cls/1/model.onnx"), batch=32, thresh=0.9).upright(crops)
    """

    def __init__(self, session: ort.InferenceSession, *, batch: int, thresh: float) -> None:
        self._session = session
        self._input_name = session.get_inputs()[0].name
        self._batch = batch
        self._thresh = thresh
        self._postprocess = ClsPostProcess(list(CLS_LABELS))
        # rapidocr's resize needs only `cls_image_shape`; its __init__ would open a second session.
        self._resizer = TextClassifier.__new__(TextClassifier)
        self._resizer.cls_image_shape = list(CLS_IMAGE_SHAPE)

    def upright(self, crops: Sequence[np.ndarray]) -> list[np.ndarray]:
        """The crops, with those classified as rotated 180 degrees (score > thresh) rotated back."""
        result = list(crops)
        for start in range(0, len(crops), self._batch):
            indices = range(start, min(start + self._batch, len(crops)))
            batch = np.stack([self._resizer.resize_norm_img(crops[i]) for i in indices]).astype(np.float32)
            probs = self._session.run(None, {self._input_name: batch})[0]
            for index, (label, score) in zip(indices, self._postprocess(probs)):
                if label == "180" and score > self._thresh:
                    result[index] = cv2.rotate(crops[index], cv2.ROTATE_180)
        return result


class LineRecognizer:
    """Reads text lines: (text, confidence in 0..1) per crop.

    Example::

        texts = LineRecognizer(create_session(".../ppocr_rec/1/model.onnx"), batch=16).recognize(crops)
    """

    def __init__(self, session: ort.InferenceSession, *, batch: int, width_step: int = 1) -> None:
        metadata = session.get_modelmeta().custom_metadata_map
        if CHARACTER_KEY not in metadata:
            raise ValueError(f"recogniser model has no {CHARACTER_KEY!r} metadata (its character dictionary)")
        self._session = session
        self._input_name = session.get_inputs()[0].name
        self._batch = batch
        self._width_step = width_step
        self._decode = CTCLabelDecode(character=metadata[CHARACTER_KEY].splitlines())
        self._resizer = TextRecognizer.__new__(TextRecognizer)
        self._resizer.rec_image_shape = list(REC_IMAGE_SHAPE)

    def recognize(self, crops: Sequence[np.ndarray]) -> list[tuple[str, float]]:
        """(text, mean per-character confidence) for each crop, in input order."""
        results: list[tuple[str, float]] = [("", 0.0)] * len(crops)
        height = REC_IMAGE_SHAPE[1]
        widths = [input_width(crop.shape, self._width_step) for crop in crops]
        for width, indices in chunks_by_width(widths, self._batch):
            # rapidocr pads to int(48 * ratio); +0.5 keeps float rounding from losing a pixel.
            ratio = (width + 0.5) / height
            batch = np.stack([self._resizer.resize_norm_img(crops[i], ratio) for i in indices]).astype(np.float32)
            preds = self._session.run(None, {self._input_name: batch})[0]
            lines, _words = self._decode(preds, False)
            for index, (text, score) in zip(indices, lines):
                results[index] = (text, float(score))
        return results
