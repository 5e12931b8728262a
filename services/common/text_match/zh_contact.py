"""Obfuscated contact details as a spam signal (WeChat / QQ / phone written to dodge filters).

Spam hides a contact behind app-name homophones (薇信, 威信, V信, vx, 扣扣, 企鹅), separators
(7-3-6-1..., 139/0886/6521) and Chinese, circled or full-width numerals (幺三九零..., ①⑧⑧...). Two
shapes are reported: an app name followed closely by an account (digits or letters+digits), and a
phone-length run of digits written with numerals or separators. Runs on the ORIGINAL text with a
per-character NFKC fold (so offsets stay exact and leet folding does not turn 520 into "s2o").

Both shapes are Chinese spam's: a text without a Han character reports only a digit run written
with non-ASCII numerals (①⑧⑧...). In English, "Q3 results", a booking code like XK7Q2P and a phone
number written 800-555-0199 are ordinary text, not an evasion. An account is one token of letters,
digits and _- that holds a digit, then digit-led groups behind separators (8866 1234), or single
characters spaced out (l u c k y 6 6 8 8): the words after it never join it.

Example::

    >>> text = "加薇信 ab8866123"
    >>> [text[s:e] for s, e in contact_spans(text)]
    ['薇信 ab8866123']
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

from services.common.text_match.scripts import is_cjk

__all__ = ["contact_spans"]

_CN_DIGITS = str.maketrans("零〇幺一二三四五六七八九", "001123456789")
_APP = (r"(?:💚信|微信|薇信|威信|徽信|围信|卫星|v信|v❤|薇❤|微❤|威❤|威x|薇x|微x|v芯|薇芯|威芯|微芯|wx|vx|weixin|扣扣|qq"
        r"|企鹅|扣|q|wei\s?xin|tg|telegram|纸飞机|飞机号|电报"
        # one letter or character of an app name alone, only right before a colon (薇：yy6666, V: hh8888)
        r"|(?:微|薇|威|徽|v|企)(?=\s?[:：]))")
_SEP = r"[\s\-_./:：,，·|*]{0,3}"
#: an account: one character at a time behind separators (l u c k y 6 6 8 8), or one token of letters,
#: digits and _- holding a digit, then digit-led groups behind separators (8866 1234)
_ACCOUNT = (rf"(?:号|同号)?{_SEP}(?:[a-z\d](?:[\s\-_./·|*]{{1,3}}[a-z\d]){{4,}}(?![a-z\d])"
            rf"|[a-z_\-]{{0,14}}\d[a-z\d_\-]*(?:{_SEP}\d[a-z\d_\-]*)*|同号)")
#: a Latin app name (q, wx, qq...) starts a word: the q of "faq" or of XK7Q2P names no app
_APP_CONTACT = re.compile(rf"(?<![a-z\d]){_APP}{_SEP}{_ACCOUNT}")
#: an account holds a digit and is at least this long (letters and digits), or is 同号: shorter ones are codes and counts
_ACCOUNT_MIN = 5
#: Telegram-style handles: letters only are common there, so an @ or a colon after the app name is required
_HANDLE_CONTACT = re.compile(r"(?<![a-z\d])(?:tg|telegram|纸飞机|飞机号?|电报)\s?[:：]?\s?@[a-z0-9_]{4,}"
                             r"|(?<![a-z\d])(?:tg|telegram|纸飞机|电报)\s?[:：]\s?[a-z][a-z0-9_]{4,}")
#: a service hotline or landline in its usual written form (400-161-9995, 010-6512 3456): no evasion
_SERVICE_NUMBER = re.compile(r"(?:400|800|0\d{2,3})[-\s]\d{3,4}[-\s]?\d{3,4}")
_SPELLED_NUMBER = re.compile(rf"(?<!\d)\d(?:{_SEP}\d){{7,11}}(?!{_SEP}\d)")  # QQ/phone length, not order numbers


def _fold(text: str) -> str:
    if text.isascii():  # NFKC leaves ASCII alone: skip the per-character pass (most long texts)
        return text.lower().translate(_CN_DIGITS)
    return "".join(map(_fold_char, text)).translate(_CN_DIGITS)


@lru_cache(maxsize=65536)
def _fold_char(char: str) -> str:
    """One character NFKC-folded and lower-cased, kept as is when folding would change the length
    (offsets stay exact). Cached: texts reuse few characters."""
    folded = unicodedata.normalize("NFKC", char).lower()
    return folded if len(folded) == 1 else char.lower()


def contact_spans(text: str) -> list[tuple[int, int]]:
    """Half-open spans of `text` that look like an obfuscated contact (app name + account, or a
    long digit run written with separators or non-ASCII numerals)."""
    folded = _fold(text)
    han = any(is_cjk(c) for c in text)
    contacts = _APP_CONTACT.finditer(folded) if han else iter(())
    spans = [m.span() for m in contacts if m.group().endswith("同号") or _is_account(m.group())]
    if han:
        spans.extend(m.span() for m in _HANDLE_CONTACT.finditer(folded) if not any(s <= m.start() < e for s, e in spans))
    for match in _SPELLED_NUMBER.finditer(folded):
        surface = text[match.start():match.end()]
        obfuscated = not surface.isascii() or (han and not surface.isdigit())
        obfuscated = obfuscated and _SERVICE_NUMBER.fullmatch(surface) is None
        if obfuscated and not any(s <= match.start() < e for s, e in spans):
            spans.append(match.span())
    return sorted(spans)


def _is_account(contact: str) -> bool:
    """Whether the part of a (folded) app-name contact after the app name holds a digit and at least
    `_ACCOUNT_MIN` letters and digits."""
    match = re.match(_APP, contact)
    rest = contact[match.end():] if match else contact
    return any(c.isdigit() for c in rest) and sum(c.isascii() and c.isalnum() for c in rest) >= _ACCOUNT_MIN
