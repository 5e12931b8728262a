"""Batched line classification (0/180 degrees) and recognition (CTC) over all lines of a batch.

Lines from every image of a batch are pooled, sorted by aspect ratio and cut into chunks, so the
recogniser sees `rec_batch` lines per run padded only to the widest line of their chunk (rapidocr does
the same, but per image and 6 lines at a time). Resizing, normalisation and decoding are rapidocr's
own: `TextClassifier.resize_norm_img`, `TextRecognizer.resize_norm_img`, `ClsPostProcess`,
`CTCLabelDecode`.
"""

from __future__ import annotations

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


def chunks_by_ratio(crops: Sequence[np.ndarray], size: int, *, min_ratio: float = 0.0,
                    max_spread: float = float("inf")) -> list[np.ndarray]:
    """Indices of `crops` sorted by width/height (floored at `min_ratio`), cut into chunks.

    A chunk holds at most `size` crops, and its widest crop is at most `max_spread` times as wide
    (relative to height) as its narrowest, which bounds how much padding any crop gets.

    Example::

        chunks_by_ratio([wide, narrow, medium], 2)   # [array([1, 2]), array([0])]
    """
    ratios = np.array([max(crop.shape[1] / float(crop.shape[0]), min_ratio) for crop in crops])
    order = np.argsort(ratios, kind="stable")
    chunks: list[np.ndarray] = []
    start = 0
    for end in range(1, len(order) + 1):
        if end == len(order) or end - start == size or ratios[order[end]] > ratios[order[start]] * max_spread:
            chunks.append(order[start:end])
            start = end
    return chunks


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
        for indices in chunks_by_ratio(crops, self._batch):
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

    def __init__(self, session: ort.InferenceSession, *, batch: int, max_spread: float = float("inf")) -> None:
        metadata = session.get_modelmeta().custom_metadata_map
        if CHARACTER_KEY not in metadata:
            raise ValueError(f"recogniser model has no {CHARACTER_KEY!r} metadata (its character dictionary)")
        self._session = session
        self._input_name = session.get_inputs()[0].name
        self._batch = batch
        self._max_spread = max_spread
        self._decode = CTCLabelDecode(character=metadata[CHARACTER_KEY].splitlines())
        self._resizer = TextRecognizer.__new__(TextRecognizer)
        self._resizer.rec_image_shape = list(REC_IMAGE_SHAPE)

    def recognize(self, crops: Sequence[np.ndarray]) -> list[tuple[str, float]]:
        """(text, mean per-character confidence) for each crop, in input order."""
        results: list[tuple[str, float]] = [("", 0.0)] * len(crops)
        _channels, height, min_width = REC_IMAGE_SHAPE
        for indices in chunks_by_ratio(crops, self._batch, min_ratio=min_width / height, max_spread=self._max_spread):
            ratios = [crops[i].shape[1] / float(crops[i].shape[0]) for i in indices]
            max_ratio = max([min_width / height, *ratios])
            batch = np.stack([self._resizer.resize_norm_img(crops[i], max_ratio) for i in indices]).astype(np.float32)
            preds = self._session.run(None, {self._input_name: batch})[0]
            lines, _words = self._decode(preds, False, wh_ratio_list=ratios, max_wh_ratio=max_ratio)
            for index, (text, score) in zip(indices, lines):
                results[index] = (text, float(score))
        return results
