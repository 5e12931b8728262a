"""Obfuscated contact details as a spam signal (WeChat / QQ / phone written to dodge filters).

Spam hides a contact behind app-name homophones (薇信, 威信, V信, vx, 扣扣, 企鹅), separators
(7-3-6-1..., 139/0886/6521) and Chinese, circled or full-width numerals (幺三九零..., ①⑧⑧...). Two
shapes are reported: an app name followed closely by an account (digits or letters+digits), and a
phone-length run of digits written with numerals or separators. Runs on the ORIGINAL text with a
per-character NFKC fold (so offsets stay exact and leet folding does not turn 520 into "s2o").

Example::

    >>> [text[s:e] for s, e in (contact_spans(text := "加薇信 ab8866123"))]
    ['薇信 ab8866123']
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["contact_spans"]

_CN_DIGITS = str.maketrans("零〇幺一二三四五六七八九", "001123456789")
_APP = r"(?:微信|薇信|威信|徽信|围信|卫星|v信|v❤|wx|vx|weixin|扣扣|qq|企鹅|扣|q)"
_SEP = r"[\s\-_./:：,，·|*]{0,3}"
_ACCOUNT = rf"(?:号|同号)?{_SEP}(?:[a-z_\-\s]{{0,14}}\d(?:{_SEP}[a-z\d_]){{3,}}|同号)"
_APP_CONTACT = re.compile(rf"{_APP}{_SEP}{_ACCOUNT}")
_SPELLED_NUMBER = re.compile(rf"(?<!\d)\d(?:{_SEP}\d){{7,11}}(?!{_SEP}\d)")  # QQ/phone length, not order numbers


def _fold(text: str) -> str:
    if text.isascii():  # NFKC leaves ASCII alone: skip the per-character pass (most long texts)
        return text.lower().translate(_CN_DIGITS)
    out = []
    for char in text:
        folded = unicodedata.normalize("NFKC", char).lower()
        out.append(folded if len(folded) == 1 else char.lower())
    return "".join(out).translate(_CN_DIGITS)


def contact_spans(text: str) -> list[tuple[int, int]]:
    """Half-open spans of `text` that look like an obfuscated contact (app name + account, or a
    long digit run written with separators or non-ASCII numerals)."""
    folded = _fold(text)
    spans = [m.span() for m in _APP_CONTACT.finditer(folded)]
    for match in _SPELLED_NUMBER.finditer(folded):
        surface = text[match.start():match.end()]
        obfuscated = not surface.isascii() or not surface.isdigit()
        if obfuscated and not any(s <= match.start() < e for s, e in spans):
            spans.append(match.span())
    return sorted(spans)
