"""The batched pipeline reads what rapidocr's own engine reads (same detector settings).

rapidocr recognises up to 6 lines of one image per run, padded to the widest; a short line padded to
a long one can lose a space next to CJK text. The service pads each line only to its own width
(rounded up to 16 px), which is what the engine does with `Rec.rec_batch_num=1`: texts and polygons
match that exactly, and the default engine up to spaces next to CJK characters.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
from rapidocr import RapidOCR

from services.common.image_decode import decode_rgb
from services.ocr.pipeline import OcrPipeline
from bench.render import render_text_image

PAGES = [
    (["Hello world 2026", "内容审核测试", "免费领取 加微信"], (640, 480), 28),
    (["免费领取 加微信", "Contact me at example dot com"], (640, 480), 28),
    (["限时优惠 50% OFF", "扫码关注公众号", "Call 400-123-4567"], (800, 600), 18),
    (["The quick brown fox jumps", "中文English混合Mixed"], (1280, 720), 36),
]
ENGINE_PARAMS = {"Det.limit_type": "max", "Det.limit_side_len": 960, "Global.log_level": "error"}


def _squash_cjk_spaces(text: str) -> str:
    return re.sub(r"\s+(?=[\u3000-\u9fff])|(?<=[\u3000-\u9fff])\s+", "", text)


@pytest.fixture(scope="module")
def batch_reads(pipeline: OcrPipeline) -> list[tuple[list[str], list[float], np.ndarray]]:
    images = [decode_rgb(render_text_image(lines, size, font)) for lines, size, font in PAGES]
    return [([line.text for line in lines], [line.confidence for line in lines], np.array([line.polygon for line in lines]))
            for lines in pipeline.run(images)]


def _engine_reads(params: dict[str, Any]) -> list[Any]:
    engine = RapidOCR(params={**ENGINE_PARAMS, **params})
    return [engine(render_text_image(lines, size, font)) for lines, size, font in PAGES]


def test_matches_engine_recognising_one_line_per_run(batch_reads: list[tuple[list[str], list[float], np.ndarray]]) -> None:
    for (texts, scores, polygons), result in zip(batch_reads, _engine_reads({"Rec.rec_batch_num": 1}), strict=True):
        assert texts == list(result.txts)
        assert (polygons == np.rint(result.boxes).astype(int)).all()
        assert np.allclose(scores, result.scores, atol=0.05)


def test_matches_default_engine_up_to_spaces_next_to_cjk(batch_reads: list[tuple[list[str], list[float], np.ndarray]]) -> None:
    for (texts, _scores, polygons), result in zip(batch_reads, _engine_reads({}), strict=True):
        assert [_squash_cjk_spaces(t) for t in texts] == [_squash_cjk_spaces(t) for t in result.txts]
        assert (polygons == np.rint(result.boxes).astype(int)).all()
