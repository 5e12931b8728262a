from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

from services.common.image_decode import decode_rgb
from services.common.serving.model_repository import find_model
from services.common.serving.onnx_session import create_session
from services.ocr.detection import BatchDetector, plan_groups, stack_padded
from services.ocr.settings import OcrSettings
from bench.render import render_text_image


def _bgr(png: bytes) -> np.ndarray:
    return cv2.cvtColor(decode_rgb(png), cv2.COLOR_RGB2BGR)


def test_plan_groups_by_shape_keeps_first_seen_order_and_skips_missing() -> None:
    shapes = [(480, 640), None, (640, 480), (480, 640)]
    assert plan_groups(shapes, "shape") == [((480, 640), [0, 3]), ((640, 480), [2])]


def test_plan_groups_pad_makes_one_run_at_the_largest_sides() -> None:
    assert plan_groups([(480, 640), (640, 480), None], "pad") == [((640, 640), [0, 1])]
    assert plan_groups([None, None], "pad") == []


def test_stack_padded_repeats_edge_pixels_right_and_bottom() -> None:
    a = np.arange(8, dtype=np.float32).reshape(1, 1, 2, 4)
    b = np.full((1, 1, 4, 2), 9, np.float32)
    batch = stack_padded([a, b], (4, 4))
    assert batch.shape == (2, 1, 4, 4) and batch.dtype == np.float32
    assert (batch[0, 0, :2] == a[0, 0]).all() and (batch[0, 0, 2:] == a[0, 0, 1]).all()
    assert (batch[1] == 9).all()


def test_padding_creates_no_boxes_and_matches_per_shape_runs(repository: Path) -> None:
    session = create_session(str(find_model("ppocr_det", "1", repository).path))
    images = [_bgr(render_text_image(["Hello world 2026"], (320, 160), 24)),
              _bgr(render_text_image(["内容审核测试", "免费领取 加微信"], (480, 640), 28)),
              _bgr(render_text_image([], (200, 120)))]
    by_shape = BatchDetector(session, OcrSettings(det_grouping="shape")).detect(images)
    padded = BatchDetector(session, OcrSettings(det_grouping="pad")).detect(images)
    assert [len(b) for b in padded] == [1, 2, 0]
    for shape_boxes, pad_boxes, image in zip(by_shape, padded, images):
        assert np.abs(shape_boxes - pad_boxes).max(initial=0) <= 2
        height, width = image.shape[:2]
        assert (pad_boxes[..., 0] <= width).all() and (pad_boxes[..., 1] <= height).all()
