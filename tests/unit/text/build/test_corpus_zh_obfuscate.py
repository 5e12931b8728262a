"""Seeded obfuscations for the Chinese corpus."""

from __future__ import annotations

import random

import pytest

from services.text.build.corpus_zh_obfuscate import obfuscate, strip_marks


def test_strip_marks() -> None:
    assert strip_marks("你就是个[废物]") == "你就是个废物"


def test_separators_go_inside_the_marked_span_only() -> None:
    for seed in range(30):
        out = obfuscate("separators", "你就是个[废物]", random.Random(seed))
        assert out is not None and out.startswith("你就是个废") and out.endswith("物") and len(out) > 6, out


def test_without_marks_the_whole_text_is_the_span() -> None:
    out = obfuscate("zero_width", "滚出去", random.Random(1))
    assert out is not None and out[0] == "滚" and out[-1] == "去" and len(out) == 5


def test_zero_width_characters_are_invisible_format_characters() -> None:
    out = obfuscate("zero_width", "[傻逼]你", random.Random(2))
    assert out is not None and out[0] == "傻" and out[2:] == "逼你" and out[1] in "\u200b\u200c\u200d\u2060\ufeff"


def test_full_width_changes_ascii_only() -> None:
    assert obfuscate("full_width", "加[vx]：ab12 好", random.Random(0)) == "加ｖｘ：ａｂ１２\u3000好"
    assert obfuscate("full_width", "你就是个[废物]", random.Random(0)) is None


def test_traditional_uses_opencc() -> None:
    assert obfuscate("traditional", "[滚]出这个群", random.Random(0)) == "滾出這個羣"
    assert obfuscate("traditional", "[中]文", random.Random(0)) is None


def test_repetition_repeats_part_of_the_span() -> None:
    outs = {obfuscate("repetition", "[sb]吧", random.Random(seed)) for seed in range(40)}
    assert None not in outs
    assert all(o is not None and o.endswith("吧") and o.count("s") >= 1 and len(o) > 3 for o in outs)
    assert "sbsb吧" in outs or "sbsbsb吧" in outs  # the whole span said again
    assert any(o is not None and o.startswith("sbb") for o in outs)  # one character stuttered


def test_same_seed_same_result() -> None:
    a = obfuscate("separators", "[卧槽]，又输了", random.Random(9))
    assert a == obfuscate("separators", "[卧槽]，又输了", random.Random(9))


def test_hand_only_families_are_refused() -> None:
    with pytest.raises(ValueError, match="homophone"):
        obfuscate("homophone", "[废物]", random.Random(0))
