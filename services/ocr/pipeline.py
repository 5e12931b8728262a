"""The batched OCR pipeline: detect lines in every image, then classify and read all lines at once.

Stages, each over the whole batch (not one image or one line at a time):

1. prepare each image as rapidocr's engine does: RGB -> BGR, keep the sides within 30..2000 px
   (`resize_image_within_bounds`), letterbox very flat or tiny images (`apply_vertical_padding`);
2. detection: `BatchDetector` (images of equal input size share a run);
3. crop each line (`get_rotate_crop_image`), pooled across images;
4. angle classification and recognition over the pooled lines, sorted by aspect ratio and chunked;
5. map boxes back to original pixels (`map_boxes_to_original`), drop empty lines and lines below
   `text_score`, keep rapidocr's reading order (top-to-bottom, then left-to-right).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import cv2
import numpy as np
import onnxruntime as ort
from rapidocr.utils.process_img import (
    apply_vertical_padding,
    get_rotate_crop_image,
    map_boxes_to_original,
    resize_image_within_bounds,
)

from services.common.contracts.ocr import OcrLine as OcrLine  # the one line type (re-exported: the pipeline makes them)
from services.ocr.detection import BatchDetector
from services.ocr.recognition import AngleClassifier, LineRecognizer
from services.ocr.settings import OcrSettings

# rapidocr 3.10.0 `Global` defaults, kept so results match its engine.
MIN_SIDE_LEN = 30
MAX_SIDE_LEN = 2000
MIN_HEIGHT = 30
WIDTH_HEIGHT_RATIO = 8

Point = tuple[int, int]


@dataclass(frozen=True)
class _Prepared:
    image: np.ndarray  # BGR, possibly resized and letterboxed
    record: dict[str, Any]  # rapidocr's op_record: how to map boxes back
    original_shape: tuple[int, int]


def _prepare(rgb: np.ndarray) -> _Prepared:
    bgr = cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR)
    image, ratio_h, ratio_w = resize_image_within_bounds(bgr, MIN_SIDE_LEN, MAX_SIDE_LEN)
    record: dict[str, Any] = {"preprocess": {"ratio_h": ratio_h, "ratio_w": ratio_w}}
    image, record = apply_vertical_padding(image, record, WIDTH_HEIGHT_RATIO, MIN_HEIGHT)
    return _Prepared(image, record, (rgb.shape[0], rgb.shape[1]))


def _polygon(box: np.ndarray) -> tuple[Point, Point, Point, Point]:
    points = [(int(x), int(y)) for x, y in np.rint(box).astype(np.int64)]
    return points[0], points[1], points[2], points[3]


class OcrPipeline:
    """Reads the text lines of a batch of images.

    Example::

        pipeline = OcrPipeline(det_session, cls_session, rec_session, OcrSettings())
        [lines] = pipeline.run([rgb])          # rgb: uint8 [H, W, 3]
        lines[0].text, lines[0].polygon        # "Hello world 2026", ((37, 43), (253, 43), ...)
    """

    def __init__(self, det: ort.InferenceSession, cls: ort.InferenceSession, rec: ort.InferenceSession,
                 settings: OcrSettings = OcrSettings()) -> None:
        self.settings = settings
        self._detector = BatchDetector(det, settings)
        self._classifier = AngleClassifier(cls, batch=settings.cls_batch, thresh=settings.cls_thresh)
        self._recognizer = LineRecognizer(rec, batch=settings.rec_batch, width_step=settings.rec_width_step)

    def run(self, images: Sequence[np.ndarray]) -> list[list[OcrLine]]:
        """Lines per image (RGB uint8 [H, W, 3]), in reading order."""
        for index, image in enumerate(images):
            if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
                raise ValueError(f"images[{index}] must be uint8 [H, W, 3], got {image.dtype} {image.shape}")
        prepared = [_prepare(image) for image in images]
        boxes = self._detector.detect([p.image for p in prepared])
        crops = [get_rotate_crop_image(p.image, box.copy()) for p, image_boxes in zip(prepared, boxes)
                 for box in image_boxes]
        if self.settings.use_cls and crops:
            crops = self._classifier.upright(crops)
        texts = iter(self._recognizer.recognize(crops) if crops else [])
        return [self._lines(p, image_boxes, [next(texts) for _ in image_boxes]) for p, image_boxes in zip(prepared, boxes)]

    def _lines(self, prepared: _Prepared, boxes: np.ndarray, texts: list[tuple[str, float]]) -> list[OcrLine]:
        if not len(boxes):
            return []
        height, width = prepared.original_shape
        mapped = map_boxes_to_original(boxes.astype(np.float32), prepared.record, height, width)
        return [OcrLine(text, score, _polygon(box)) for box, (text, score) in zip(mapped, texts)
                if text.strip() and score >= self.settings.text_score]
