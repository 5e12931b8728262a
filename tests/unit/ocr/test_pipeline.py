from __future__ import annotations

import difflib
import io
import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from services.common.image_decode import decode_rgb
from services.common.serving.model_repository import find_model
from services.common.serving.onnx_session import create_session
from services.ocr.pipeline import OcrLine, OcrPipeline
from services.ocr.settings import OcrSettings
from bench.render import TextBox, render_photo_like, render_text_image, text_layout

ENGLISH = ["Hello world 2026", "Call 400-123-4567"]
CHINESE = ["内容审核测试", "扫码关注公众号"]
MIXED = ["免费领取 加微信", "限时优惠 50% OFF"]


def _texts(lines: list[OcrLine]) -> list[str]:
    return [line.text for line in lines]


def _without_cjk_spaces(text: str) -> str:
    # PP-OCRv6 does not reliably emit a space next to CJK characters ("免费领取 加微信" is read without
    # it at 28 px, with it at 20 and 32 px; rapidocr's own engine reads the same). Latin spaces are kept.
    return re.sub(r"\s+(?=[\u3000-\u9fff])|(?<=[\u3000-\u9fff])\s+", "", text)


def _rotated_180(png: bytes) -> np.ndarray:
    buffer = io.BytesIO()
    Image.open(io.BytesIO(png)).rotate(180).save(buffer, format="PNG")
    return decode_rgb(buffer.getvalue())


def _iou(line: OcrLine, box: TextBox) -> float:
    xs, ys = [p[0] for p in line.polygon], [p[1] for p in line.polygon]
    left, top, right, bottom = max(min(xs), box.left), max(min(ys), box.top), min(max(xs), box.right), min(max(ys), box.bottom)
    inter = max(0, right - left) * max(0, bottom - top)
    union = (max(xs) - min(xs)) * (max(ys) - min(ys)) + (box.right - box.left) * (box.bottom - box.top) - inter
    return inter / union


@pytest.mark.parametrize("lines", [ENGLISH, CHINESE, MIXED], ids=["english", "chinese", "mixed"])
def test_reads_clean_rendering_in_reading_order(pipeline: OcrPipeline, lines: list[str]) -> None:
    [result] = pipeline.run([decode_rgb(render_text_image(lines))])
    assert [_without_cjk_spaces(t) for t in _texts(result)] == [_without_cjk_spaces(t) for t in lines]
    assert all(0.5 <= line.confidence <= 1.0 for line in result)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_reads_noisy_background_with_high_character_similarity(pipeline: OcrPipeline, seed: int) -> None:
    lines = [ENGLISH[0], CHINESE[0], MIXED[0]]
    [result] = pipeline.run([decode_rgb(render_text_image(lines, background="noisy", seed=seed))])
    similarity = difflib.SequenceMatcher(None, "\n".join(lines), "\n".join(_texts(result))).ratio()
    assert similarity >= 0.95, _texts(result)


def test_english_and_chinese_lines_are_read_exactly(pipeline: OcrPipeline) -> None:
    [result] = pipeline.run([decode_rgb(render_text_image(ENGLISH + CHINESE))])
    assert _texts(result) == ENGLISH + CHINESE


def test_polygons_are_integer_pixels_around_the_drawn_text(pipeline: OcrPipeline) -> None:
    lines, size = ["Hello world 2026", "内容审核测试", "免费领取 加微信"], (800, 600)
    [result] = pipeline.run([decode_rgb(render_text_image(lines, size, font_px=32))])
    assert _texts(result) == lines
    for line, drawn in zip(result, text_layout(lines, size, font_px=32)):
        assert all(isinstance(v, int) for point in line.polygon for v in point)
        assert _iou(line, drawn) >= 0.5, (line.polygon, drawn)


def test_polygons_map_back_to_original_pixels_when_the_detector_downscales(pipeline: OcrPipeline) -> None:
    lines, size = ["Hello world 2026", "内容审核测试"], (1920, 1080)
    [result] = pipeline.run([decode_rgb(render_text_image(lines, size, font_px=48))])
    assert _texts(result) == lines
    for line, drawn in zip(result, text_layout(lines, size, font_px=48)):
        assert _iou(line, drawn) >= 0.5, (line.polygon, drawn)


def test_batch_of_four_reads_the_same_as_four_single_calls(pipeline: OcrPipeline) -> None:
    images = [decode_rgb(render_text_image(ENGLISH)), decode_rgb(render_text_image(CHINESE, (480, 640))),
              decode_rgb(render_text_image(MIXED, background="noisy", seed=3)),
              decode_rgb(render_photo_like((320, 240), seed=1, shapes=0))]
    singles = [pipeline.run([image])[0] for image in images]
    assert pipeline.run(images) == singles
    assert singles[3] == []


def test_upside_down_text_is_turned_upright_by_the_angle_classifier(pipeline: OcrPipeline) -> None:
    [result] = pipeline.run([_rotated_180(render_text_image(ENGLISH))])
    assert _texts(result) == list(reversed(ENGLISH))


def test_lines_below_text_score_are_dropped(repository: Path) -> None:
    det, cls, rec = (create_session(str(find_model(n, "1", repository).path)) for n in ("ppocr_det", "ppocr_cls", "ppocr_rec"))
    image = decode_rgb(render_text_image(ENGLISH))
    [everything] = OcrPipeline(det, cls, rec, OcrSettings(text_score=0.0)).run([image])
    cutoff = min(line.confidence for line in everything) + 1e-6
    [kept] = OcrPipeline(det, cls, rec, OcrSettings(text_score=cutoff)).run([image])
    assert kept == [line for line in everything if line.confidence >= cutoff]
    assert len(kept) == len(everything) - 1


def test_empty_batch_and_blank_image(pipeline: OcrPipeline) -> None:
    assert pipeline.run([]) == []
    assert pipeline.run([np.full((480, 640, 3), 255, np.uint8)]) == [[]]


def test_tiny_and_very_wide_images_are_handled(pipeline: OcrPipeline) -> None:
    tiny, wide = np.full((8, 8, 3), 255, np.uint8), decode_rgb(render_text_image(["Hello world 2026"], (1400, 110), 28))
    assert pipeline.run([tiny, wide]) == [[], pipeline.run([wide])[0]]
    assert _texts(pipeline.run([wide])[0]) == ["Hello world 2026"]


def test_rejects_non_rgb_arrays(pipeline: OcrPipeline) -> None:
    with pytest.raises(ValueError, match=r"images\[0\]"):
        pipeline.run([np.zeros((10, 10), np.uint8)])


def test_line_to_json_shape() -> None:
    line = OcrLine("hi", 0.123456, ((1, 2), (3, 2), (3, 4), (1, 4)))
    assert line.to_json() == {"text": "hi", "confidence": 0.12346, "polygon": [[1, 2], [3, 2], [3, 4], [1, 4]]}
