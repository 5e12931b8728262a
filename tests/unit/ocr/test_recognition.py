from __future__ import annotations

from services.ocr.recognition import chunks_by_width, input_width


def test_input_width_scales_to_height_48_rounds_up_and_keeps_320_minimum() -> None:
    assert input_width((30, 400), 1) == 640
    assert input_width((30, 410), 32) == 672  # 656 rounded up to a multiple of 32
    assert input_width((40, 100), 16) == 320


def test_chunks_by_width_groups_equal_widths_narrowest_first() -> None:
    assert chunks_by_width([320, 640, 320, 320], 2) == [(320, [0, 2]), (320, [3]), (640, [1])]
    assert chunks_by_width([], 4) == []
