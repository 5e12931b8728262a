"""Flags in a normalised text: which letters came from regional indicators that show as real flags.

`normalize` folds every regional indicator (🇦-🇿) to its letter, so a blocklist reads "🇰🇮🇱🇱 🇾🇴🇺" as
"kill you" and three real flags in a row (🇳🇮 🇬🇬 🇪🇷) as the slur they spell. The English heads should
not read a real flag as a word, though: "🇺🇦" would be the two-letter token "ua", and the heads score
such short tokens at random ("🇺🇦❤️" read as "ua❤️" scored `sexual` 0.75). `flag_letters` finds the
letters of runs of regional indicators that are whole flags (every pair a region code with a flag); a
run with a pair that is no flag, or an odd count, is someone spelling with them, and its letters stay
letters. `with_flags` puts the whole flags back as sent, which is what the heads read (an emoji-only
text, flags included, is then left to the lexicon: `services.text.model.english_reads`).

Example::

    >>> from services.common.text_match.normalize import normalize
    >>> n = normalize("go 🇫🇷! 🇰🇮🇱🇱")
    >>> n.text, with_flags(n, n.text)
    ('go fr! kill', 'go 🇫🇷! kill')
"""

from __future__ import annotations

import re

from services.common.text_match.normalize import NormalizedText

__all__ = ["FLAG_REGIONS", "flag_letters", "with_flags"]

_FIRST, _LAST = 0x1F1E6, 0x1F1FF  # 🇦 .. 🇿
#: Region codes whose regional-indicator pair shows as a flag: ISO 3166-1 alpha-2 plus the other
#: sequences Unicode's emoji data lists (EU, UN, XK and the reserved AC CP DG EA IC TA).
FLAG_REGIONS = frozenset("""
AD AE AF AG AI AL AM AO AQ AR AS AT AU AW AX AZ BA BB BD BE BF BG BH BI BJ BL BM BN BO BQ BR BS BT BV BW
BY BZ CA CC CD CF CG CH CI CK CL CM CN CO CR CU CV CW CX CY CZ DE DJ DK DM DO DZ EC EE EG EH ER ES ET FI
FJ FK FM FO FR GA GB GD GE GF GG GH GI GL GM GN GP GQ GR GS GT GU GW GY HK HM HN HR HT HU ID IE IL IM IN
IO IQ IR IS IT JE JM JO JP KE KG KH KI KM KN KP KR KW KY KZ LA LB LC LI LK LR LS LT LU LV LY MA MC MD ME
MF MG MH MK ML MM MN MO MP MQ MR MS MT MU MV MW MX MY MZ NA NC NE NF NG NI NL NO NP NR NU NZ OM PA PE PF
PG PH PK PL PM PN PR PS PT PW PY QA RE RO RS RU RW SA SB SC SD SE SG SH SI SJ SK SL SM SN SO SR SS ST SV
SX SY SZ TC TD TF TG TH TJ TK TL TM TN TO TR TT TV TW TZ UA UG UM US UY UZ VA VC VE VG VI VN VU WF WS YE
YT ZA ZM ZW EU UN XK AC CP DG EA IC TA
""".split())


_RUN = re.compile(f"[{chr(_FIRST)}-{chr(_LAST)}]+")


def _flag_runs(original: str) -> set[int]:
    """Indices in `original` of regional indicators in runs that are whole flags."""
    indices: set[int] = set()
    for run in _RUN.finditer(original):
        letters = "".join(chr(ord("A") + ord(c) - _FIRST) for c in run.group())
        if len(letters) % 2 == 0 and all(letters[i:i + 2] in FLAG_REGIONS for i in range(0, len(letters), 2)):
            indices.update(range(run.start(), run.end()))
    return indices


def flag_letters(text: NormalizedText) -> frozenset[int]:
    """Positions in `text.text` whose character came from a regional indicator of a whole flag."""
    if _RUN.search(text.original) is None:  # almost every text: one C-level scan
        return frozenset()
    flags = _flag_runs(text.original)
    return frozenset(i for i, offset in enumerate(text.offsets) if offset in flags)


def with_flags(text: NormalizedText, shown: str) -> str:
    """`shown` (`text.text` or a string of the same length derived from it, such as its segmentation)
    with every letter of a whole flag (`flag_letters`) put back as the regional indicator it came from."""
    letters = flag_letters(text)
    if not letters:
        return shown
    # only letters: a space a segmenter put between two flags ("us gb") keeps its place
    return "".join(text.original[text.offsets[i]] if i in letters and c.isalpha() else c for i, c in enumerate(shown))
