from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest
from PIL import Image

from services.common.image_decode import ImageLimits
from services.common.serving.model_api import ServedModel
from services.common.errors import InvalidInputError
from services.common.serving.onnx_session import SessionOptions
from services.ocr.model import OcrModel, _warmup_png
from bench.render import render_photo_like, render_text_image

HELLO = ["Hello world 2026", "内容审核测试"]


def _column(*items: object) -> dict[str, np.ndarray]:
    array = np.empty((len(items), 1), dtype=object)
    for row, item in enumerate(items):
        array[row, 0] = item
    return {"IMAGE": array}


def test_metadata_and_tensor_contract(model: OcrModel) -> None:
    served: ServedModel = model
    assert (served.name, served.version, served.platform, served.max_batch_size) == ("ocr", "1", "auditmesh_ocr_pipeline", 8)
    assert [(s.name, s.datatype, s.shape) for s in served.inputs] == [("IMAGE", "BYTES", (1,))]
    assert [(s.name, s.datatype, s.shape) for s in served.outputs] == [("LINES", "BYTES", (1,)), ("ERROR", "BYTES", (1,))]


def test_reads_png_jpeg_and_webp(read: Callable[..., list[list[dict[str, Any]]]]) -> None:
    png = render_text_image(HELLO)
    encoded = [png]
    for fmt in ("JPEG", "WEBP"):
        buffer = io.BytesIO()
        Image.open(io.BytesIO(png)).save(buffer, format=fmt, quality=95)
        encoded.append(buffer.getvalue())
    for lines in read(*encoded):
        assert [line["text"] for line in lines] == HELLO
        assert all(set(line) == {"text", "confidence", "polygon"} for line in lines)
        assert all(len(line["polygon"]) == 4 and all(len(p) == 2 for p in line["polygon"]) for line in lines)


def test_outputs_are_n_by_1_bytes_json(model: OcrModel) -> None:
    out = model.infer(_column(render_text_image(["免费领取 加微信"]), render_photo_like(seed=2, shapes=0)))
    assert set(out) == {"LINES", "ERROR"}
    for array in out.values():
        assert array.shape == (2, 1) and array.dtype == object and all(isinstance(v, bytes) for v in array[:, 0])
    first = json.loads(out["LINES"][0, 0].decode("utf-8"))
    assert [line["text"] for line in first] == ["免费领取 加微信"]
    assert json.loads(out["LINES"][1, 0]) == []


def test_bad_images_get_an_error_and_never_fail_the_rest(model: OcrModel) -> None:
    good = render_text_image(HELLO)
    truncated = good[: len(good) // 2]
    out = model.infer(_column(b"not an image", good, truncated, 42, b""))
    errors = [e.decode() for e in out["ERROR"][:, 0]]
    assert errors[1] == ""
    assert "could not be decoded" in errors[0]
    assert "corrupt or truncated" in errors[2]
    assert "expected encoded image bytes" in errors[3]
    assert "empty" in errors[4]
    assert [line["text"] for line in json.loads(out["LINES"][1, 0])] == HELLO
    assert [json.loads(out["LINES"][i, 0]) for i in (0, 2, 3, 4)] == [[], [], [], []]


def test_image_limits_apply(repository: Path) -> None:
    small_limits = OcrModel(repository, SessionOptions(), limits=ImageLimits(max_side=600))
    out = small_limits.infer(_column(render_text_image(HELLO, (640, 480)), render_text_image(HELLO, (480, 320))))
    assert "640x480" in out["ERROR"][0, 0].decode() and out["ERROR"][1, 0] == b""


@pytest.mark.parametrize("inputs, message", [
    ({}, "IMAGE is missing"),
    ({"IMAGE": np.array([b"x"], dtype=object)}, r"shape \[N, 1\]"),
    ({"IMAGE": np.empty((9, 1), dtype=object)}, "max_batch_size is 8"),
])
def test_malformed_tensors_raise_invalid_input(model: OcrModel, inputs: dict[str, np.ndarray], message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        model.infer(inputs)


def test_empty_batch(model: OcrModel) -> None:
    out = model.infer({"IMAGE": np.empty((0, 1), dtype=object)})
    assert out["LINES"].shape == (0, 1) and out["ERROR"].shape == (0, 1)


def test_model_files_come_from_the_repository(model: OcrModel) -> None:
    files = {f.name: f for f in model.model_files()}
    assert set(files) == {"ppocr_det", "ppocr_cls", "ppocr_rec"}
    assert files["ppocr_rec"].source == "rapidocr==3.10.0:rapidocr/models/PP-OCRv6_rec_small.onnx"
    assert all(f.version == "1" and f.license == "Apache-2.0" and len(f.sha256) == 64 for f in files.values())


def test_warmup_image_has_text_so_every_stage_runs(model: OcrModel) -> None:
    model.warmup()
    [lines] = [json.loads(x) for x in model.infer(_column(_warmup_png()))["LINES"][:, 0]]
    assert [line["text"] for line in lines] == ["warmup 2026"]
