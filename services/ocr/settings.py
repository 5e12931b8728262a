"""OCR pipeline settings: detector resizing and thresholds, angle classifier, recogniser batching.

Defaults follow rapidocr 3.10.0's `config.yaml` except the detector resize policy: rapidocr's default
(`limit_type="min"`, 736) upscales every small image, ~770 ms per 640x480 image here; `max`/960 only
shrinks images whose longer side exceeds 960 (160-230 ms) with the same accuracy on our test images.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

LimitType = Literal["max", "min"]
DetGrouping = Literal["shape", "pad"]


@dataclass(frozen=True)
class OcrSettings:
    """How the OCR pipeline runs.

    - `limit_side_len`, `limit_type`: detector input size. "max": scale down so the longer side is at
      most `limit_side_len`; "min": scale up so the shorter side is at least `limit_side_len`. Both then
      round each side to a multiple of 32.
    - `det_thresh`: probability-map binarisation threshold; `box_thresh`: minimum mean probability of a
      box; `unclip_ratio`: how far a detected text kernel is grown into a line box.
    - `det_grouping`: "shape" runs the images of a batch that share a detector input size together
      (one run per distinct size); "pad" pads all of them to the largest size and runs once. On CPU
      "shape" is faster (the detector costs per pixel, padding pixels included); see README.md.
    - `text_score`: lines whose recognition confidence is below it are dropped.
    - `use_cls`, `cls_thresh`: rotate a line by 180 degrees when the angle classifier says so with at
      more than this confidence.
    - `rec_batch`, `cls_batch`: lines per recogniser / classifier run (the lines of all images of a
      batch are pooled, then chunked).
    - `rec_width_step`: each line goes to the recogniser at its own width (height 48), rounded up to
      this many pixels; lines of equal width share a run. Larger steps batch more lines together but
      pad them more (padding changes what the model reads, slightly); see recognition.py.

    Example::

        settings = OcrSettings(text_score=0.6, rec_batch=16)
    """

    limit_side_len: int = 960
    limit_type: LimitType = "max"
    det_thresh: float = 0.3
    box_thresh: float = 0.5
    unclip_ratio: float = 1.6
    det_grouping: DetGrouping = "shape"
    text_score: float = 0.5
    use_cls: bool = True
    cls_thresh: float = 0.9
    rec_batch: int = 16
    rec_width_step: int = 16
    cls_batch: int = 32

    def __post_init__(self) -> None:
        if self.limit_side_len < 32:
            raise ValueError(f"OcrSettings.limit_side_len must be >= 32, got {self.limit_side_len}")
        if self.limit_type not in ("max", "min"):
            raise ValueError(f"OcrSettings.limit_type must be 'max' or 'min', got {self.limit_type!r}")
        if self.det_grouping not in ("shape", "pad"):
            raise ValueError(f"OcrSettings.det_grouping must be 'shape' or 'pad', got {self.det_grouping!r}")
        for name in ("det_thresh", "box_thresh", "text_score", "cls_thresh"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"OcrSettings.{name} must be in [0, 1], got {value}")
        if self.unclip_ratio <= 0:
            raise ValueError(f"OcrSettings.unclip_ratio must be > 0, got {self.unclip_ratio}")
        for name in ("rec_batch", "cls_batch", "rec_width_step"):
            if getattr(self, name) < 1:
                raise ValueError(f"OcrSettings.{name} must be >= 1, got {getattr(self, name)}")
        if not isinstance(self.use_cls, bool):
            raise TypeError(f"OcrSettings.use_cls must be a bool, got {self.use_cls!r}")
