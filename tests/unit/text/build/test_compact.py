"""Tests for services/text/build/compact.py: the committed forms decode to exactly what training served."""

from __future__ import annotations

import numpy as np
import pytest

from services.text.build.compact import apply_delta, dequantize_rows, float16_delta, quantize_rows


def test_float16_delta_keeps_only_moved_tensors_and_decodes_bit_for_bit() -> None:
    rng = np.random.default_rng(0)
    base = {"moved": rng.normal(size=(16, 8)).astype(np.float32), "frozen": np.ones(8, np.float32)}
    tuned = {"moved": base["moved"] + rng.normal(scale=1e-3, size=(16, 8)).astype(np.float32),
             "frozen": base["frozen"].copy()}
    deltas = float16_delta(base, tuned)
    assert list(deltas) == ["moved"] and deltas["moved"].dtype == np.float16
    served = apply_delta(base, deltas)
    assert served["moved"].dtype == np.float32
    np.testing.assert_array_equal(served["moved"], base["moved"] + deltas["moved"].astype(np.float32))
    assert float(np.abs(served["moved"] - tuned["moved"]).max()) < 1e-6


def test_float16_delta_refuses_a_tensor_the_base_lacks_or_a_changed_shape() -> None:
    base = {"w": np.zeros((2, 2), np.float32)}
    with pytest.raises(KeyError, match="'x'"):
        float16_delta(base, {"x": np.zeros(2, np.float32)})
    with pytest.raises(ValueError, match="w: tuned shape"):
        float16_delta(base, {"w": np.zeros(3, np.float32)})


def test_int8_rows_are_close_and_requantizing_the_decoded_table_is_exact() -> None:
    rng = np.random.default_rng(1)
    table = rng.normal(size=(50, 384)).astype(np.float32)
    table[7] = 0.0  # a row of zeros keeps scale 0 and decodes to zeros
    codes, scale = quantize_rows(table)
    assert codes.dtype == np.int8 and scale.dtype == np.float32 and scale[7] == 0.0
    decoded = dequantize_rows(codes, scale)
    assert not decoded[7].any()
    assert float(np.abs(decoded - table).max()) <= float(scale.max()) / 2 + 1e-7
    again_codes, again_scale = quantize_rows(decoded)
    np.testing.assert_array_equal(dequantize_rows(again_codes, again_scale), decoded)
