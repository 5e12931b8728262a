"""Whole flags vs letters spelled in regional indicators (services/common/text_match/flags.py)."""

from __future__ import annotations

from services.common.text_match.flags import FLAG_REGIONS, flag_letters, with_flags
from services.common.text_match.normalize import normalize


def test_runs_of_whole_flags_are_flags_and_other_runs_are_letters() -> None:
    text = normalize("🇺🇸🇬🇧 and 🇰🇮🇱🇱 🇾🇴🇺")  # US GB: flags; KI LL: LL is none; YOU: an odd count
    assert text.text == "usgb and kill you"
    assert sorted(flag_letters(text)) == [0, 1, 2, 3]
    assert with_flags(text, text.text) == "🇺🇸🇬🇧 and kill you"


def test_text_without_regional_indicators_is_left_alone() -> None:
    text = normalize("just words")
    assert flag_letters(text) == frozenset() and with_flags(text, text.text) == "just words"


def test_only_letters_are_put_back() -> None:
    text = normalize("🇺🇸🇬🇧")
    assert with_flags(text, "u gb") == "🇺 🇬🇧"  # a space in the shown string (a segmenter's) stays


def test_the_region_list_has_the_iso_codes_and_the_extra_flag_sequences() -> None:
    assert {"US", "GB", "CN", "TW", "UA", "EU", "UN", "XK"} <= FLAG_REGIONS
    assert not {"LL", "OU", "ZZ", "AA"} & FLAG_REGIONS
    assert len(FLAG_REGIONS) == 258  # 249 ISO 3166-1 alpha-2 codes + 9 other flag sequences
