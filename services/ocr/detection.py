"""Batched text detection: one DB detector run per group of images, boxes post-processed per image.

Each image is resized as rapidocr does (`DetPreProcess`: limit the side, round both sides to a
multiple of 32, normalise). The detector is fully convolutional, so images of equal input size are
stacked into one run. Images of different sizes either run as separate groups ("shape", the default:
faster on CPU, and an image's boxes never depend on the rest of the batch) or are padded to the
largest size of the batch ("pad", one run; may suit accelerators). Padding repeats edge pixels and each
probability map is cropped back to its image's own input size before `DBPostProcess`, so padded
pixels cannot produce a box; boxes near the right/bottom edge may still move by a pixel or two.

rapidocr's helpers are imported, not copied; importing them loads rapidocr's engine modules (~0.6 s
once, no model is opened).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Sequence

import numpy as np
import onnxruntime as ort
from rapidocr.ch_ppocr_det.main import TextDetector
from rapidocr.ch_ppocr_det.utils import DBPostProcess, DetPreProcess

from services.ocr.settings import DetGrouping, OcrSettings

MEAN = (0.5, 0.5, 0.5)
STD = (0.5, 0.5, 0.5)
MAX_CANDIDATES = 1000
NO_BOXES = np.zeros((0, 4, 2), dtype=np.float32)

Shape = tuple[int, int]


def plan_groups(shapes: Sequence[Shape | None], grouping: DetGrouping) -> list[tuple[Shape, list[int]]]:
    """Split images (by detector input shape; None = nothing to detect) into detector runs.

    Returns (run shape, image indices) pairs in first-seen order.

    Example::

        plan_groups([(480, 640), (640, 480), (480, 640)], "shape")
        # [((480, 640), [0, 2]), ((640, 480), [1])]
        plan_groups([(480, 640), (640, 480)], "pad")   # [((640, 640), [0, 1])]
    """
    present = [(i, s) for i, s in enumerate(shapes) if s is not None]
    if not present:
        return []
    if grouping == "pad":
        padded = (max(s[0] for _, s in present), max(s[1] for _, s in present))
        return [(padded, [i for i, _ in present])]
    groups: dict[Shape, list[int]] = defaultdict(list)
    for index, shape in present:
        groups[shape].append(index)
    return list(groups.items())


def stack_padded(tensors: Sequence[np.ndarray], shape: Shape) -> np.ndarray:
    """Stack [1, C, h, w] tensors into [N, C, H, W], padding right/bottom by repeating the edge pixels.

    Edge repetition, unlike a constant fill, draws no new edge where the image ends, so the detector
    sees no text-like border (a grey fill after a white image produced a false box in testing).
    """
    height, width = shape
    return np.concatenate([
        np.pad(t, ((0, 0), (0, 0), (0, height - t.shape[2]), (0, width - t.shape[3])), mode="edge") for t in tensors
    ]).astype(np.float32, copy=False)


class BatchDetector:
    """Finds text line quadrilaterals in a batch of BGR images.

    Example::

        detector = BatchDetector(create_session("model_repository/ppocr_det/1/model.onnx"), OcrSettings())
        boxes = detector.detect([bgr_a, bgr_b])   # per image: float32 [K, 4, 2], reading order
    """

    def __init__(self, session: ort.InferenceSession, settings: OcrSettings) -> None:
        self._session = session
        self._input_name = session.get_inputs()[0].name
        self._grouping = settings.det_grouping
        # float32 mean/std keep rapidocr's normalisation in float32: same values, half the time.
        self._preprocess = DetPreProcess(settings.limit_side_len, settings.limit_type,
                                         np.array(MEAN, dtype=np.float32), np.array(STD, dtype=np.float32))
        self._postprocess = DBPostProcess(thresh=settings.det_thresh, box_thresh=settings.box_thresh,
                                          max_candidates=MAX_CANDIDATES, unclip_ratio=settings.unclip_ratio,
                                          score_mode="fast", use_dilation=True)

    def detect(self, images: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Boxes per image, float32 [K, 4, 2] in that image's pixels, sorted top-to-bottom, left-to-right."""
        tensors = [self._preprocess(image) for image in images]
        maps = self.probability_maps(tensors)
        results = []
        for image, prob in zip(images, maps):
            if prob is None:
                results.append(NO_BOXES)
                continue
            boxes, _scores = self._postprocess(prob, image.shape[:2])
            results.append(TextDetector.sorted_boxes(boxes) if len(boxes) else NO_BOXES)
        return results

    def probability_maps(self, tensors: Sequence[np.ndarray | None]) -> list[np.ndarray | None]:
        """Run the detector over preprocessed [1, 3, h, w] tensors; return each [1, 1, h, w] map."""
        present = {i: t for i, t in enumerate(tensors) if t is not None}
        shapes: list[Shape | None] = [None if t is None else (t.shape[2], t.shape[3]) for t in tensors]
        maps: list[np.ndarray | None] = [None] * len(tensors)
        for run_shape, indices in plan_groups(shapes, self._grouping):
            batch = stack_padded([present[i] for i in indices], run_shape)
            output = self._session.run(None, {self._input_name: batch})[0]
            for row, index in enumerate(indices):
                height, width = present[index].shape[2:]
                maps[index] = output[row : row + 1, :, :height, :width]
        return maps
