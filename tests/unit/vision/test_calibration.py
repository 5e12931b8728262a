"""services/vision/calibration.py: the piecewise-linear score map and its validation."""

from __future__ import annotations

import numpy as np
import pytest

from services.vision.calibration import SEXUAL_CALIBRATION, VIOLENCE_CALIBRATION, ScoreCalibration


def _calibration(**changes: object) -> ScoreCalibration:
    fields: dict[str, object] = {"raw": (0.0, 0.1, 1.0), "calibrated": (0.0, 0.5, 1.0),
                                 "review_threshold": 0.5, "block_threshold": 0.9}
    fields.update(changes)
    return ScoreCalibration(**fields)  # type: ignore[arg-type]


def test_apply_interpolates_between_anchors_and_clamps() -> None:
    calibrated = _calibration().apply(np.array([0.0, 0.05, 0.1, 0.55, 1.0, -0.2, 1.3], np.float32))
    assert calibrated.dtype == np.float32
    np.testing.assert_allclose(calibrated, [0.0, 0.25, 0.5, 0.75, 1.0, 0.0, 1.0], atol=1e-6)


def test_apply_keeps_shape() -> None:
    assert _calibration().apply(np.zeros((4, 1), np.float32)).shape == (4, 1)


def test_shipped_calibrations_are_monotone_and_anchor_the_thresholds() -> None:
    raw = np.linspace(0, 1, 1001)
    for calibration in (SEXUAL_CALIBRATION, VIOLENCE_CALIBRATION):
        assert np.all(np.diff(calibration.apply(raw)) >= 0)
    # Benign images measured <= 0.045 raw NSFL (README): they must land well below review.
    assert VIOLENCE_CALIBRATION.apply(np.array([0.05]))[0] < VIOLENCE_CALIBRATION.review_threshold / 2
    assert VIOLENCE_CALIBRATION.apply(np.array([0.15]))[0] == pytest.approx(VIOLENCE_CALIBRATION.review_threshold)
    np.testing.assert_allclose(SEXUAL_CALIBRATION.apply(raw), raw, atol=1e-6)


@pytest.mark.parametrize(("changes", "field"), [
    ({"raw": (0.0,), "calibrated": (0.0,)}, "same length >= 2"),
    ({"raw": (0.0, 1.0)}, "same length"),
    ({"raw": (0.0, 0.5, 1.5)}, "raw values must lie in"),
    ({"calibrated": (0.0, -0.1, 1.0)}, "calibrated values must lie in"),
    ({"raw": (0.0, 0.5, 0.5)}, "raw must be strictly increasing"),
    ({"calibrated": (0.0, 0.6, 0.5)}, "calibrated must be non-decreasing"),
    ({"review_threshold": 0.95}, "review_threshold=0.95"),
    ({"block_threshold": 1.5}, "block_threshold=1.5"),
])
def test_invalid_calibrations_name_the_field(changes: dict[str, object], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        _calibration(**changes)


def test_config_round_trip() -> None:
    assert ScoreCalibration.from_config(VIOLENCE_CALIBRATION.to_config()) == VIOLENCE_CALIBRATION


def test_from_config_names_missing_keys() -> None:
    with pytest.raises(ValueError, match="missing review_threshold, block_threshold"):
        ScoreCalibration.from_config({"raw": [0, 1], "calibrated": [0, 1]})
