"""Reported speech: the quotations a message reports or names rather than says (plain Python).

A listed word or a phrase pattern inside quotation marks is often not the writer's own: "房东在电话里直接说
"不租河南人"，我录音发给街道办了" reports what someone said in order to act on it, "评论区说'菲律宾人骨子里是奴性'，
这种话太过了" rejects it. On the naturalistic Chinese dev fold (session 43) such quoted hits were 22 of the
157 benign messages flagged, and one harmful message of 1,216 had its every hit in a quotation.

A quotation counts as reported here only when all of this holds, so that quotation marks alone are not a
way to pass a word:
- it is a pair of quotation marks (“” ‘’ 「」 『』, or straight double or single quotes) at most
  `MAX_QUOTE_CHARS` characters apart;
- the message has at least `MIN_OWN_CHARS` letters or digits of its own outside every quotation (a message
  that is only a quotation says it);
- a reporting cue stands next to it: a verb of saying, writing, calling or posting just before the opening
  mark (说, 骂, 叫, 称, 写, 刷, 发, 贴, 问, 号召, 把 ... ; `REPORTED_BEFORE`), or a demonstrative that takes the
  quotation as an object of talk just after the closing mark (这句话, 这种弹幕, 之类; `REPORTED_AFTER`).

The text model (services/text/model.py) treats a Chinese hit wholly inside a reported quotation like any
hit its model does not back (services/text/hits.py `unbacked`): it counts only where the heads give its
category 0.5 or more; otherwise it is dropped, and a top-tier slur is kept at REVIEW.

Example::

    >>> reported_quotations('房东在电话里直接说"不租河南人"，我录音发给街道办了')
    [(9, 16)]
    >>> reported_quotations('你就是个“废物”')   # no reporting cue, and too few words of its own
    []
"""

from __future__ import annotations

import re

from services.common.contracts.text import LexiconHit

__all__ = ["MAX_QUOTE_CHARS", "MIN_OWN_CHARS", "QUOTE_PAIRS", "REPORTED_AFTER", "REPORTED_BEFORE", "in_reported_quotation",
           "reported_quotations"]

#: Opening mark -> closing mark.
QUOTE_PAIRS = {"“": "”", "‘": "’", "「": "」", "『": "』", '"': '"', "'": "'"}
#: The longest quotation (marks included) read as a quoted phrase; a longer "pair" is most likely two
#: unrelated marks.
MAX_QUOTE_CHARS = 60
#: Letters or digits the message must have outside every quotation to be reporting one.
MIN_OWN_CHARS = 6
_MARKS = "".join(sorted(set(QUOTE_PAIRS) | set(QUOTE_PAIRS.values())))
#: Just before the opening mark (at most four other characters between the cue and the mark, none a
#: sentence end or another mark): a verb of saying, writing, calling or posting, or 把 (把 "..." 挂在嘴边 /
#: 说成), or a demonstrative naming a saying (那句 "...").
REPORTED_BEFORE = re.compile(r"(?:说|讲|骂|喊|叫|称|问|写|刷|发|贴|号召|声称|宣称|扣|把|那句|这句|一句|所谓)"
                             rf"[^。！？!?\n{re.escape(_MARKS)}]{{0,4}}$")
#: Just after the closing mark: the quotation taken as an object of talk.
REPORTED_AFTER = re.compile(r"^[\s—\-，,]{0,3}(?:这|那)(?:句|种|类|些|话|个词|个说法)|^(?:之类|什么的|的帽子|挂在嘴边|被当成)")
_OWN = re.compile(r"\w")


def _quotations(text: str) -> list[tuple[int, int]]:
    """Half-open spans of paired quotation marks, marks included, left to right, not nested. Not
    `zh_context.quoted_spans` (what the context rules read): that one takes book titles 《》 and no straight
    single quotes, and has no length bound."""
    spans: list[tuple[int, int]] = []
    position = 0
    while position < len(text):
        closing = QUOTE_PAIRS.get(text[position])
        if closing is not None:
            end = text.find(closing, position + 1)
            if end != -1 and end + 1 - position <= MAX_QUOTE_CHARS:
                spans.append((position, end + 1))
                position = end + 1
                continue
        position += 1
    return spans


def reported_quotations(text: str) -> list[tuple[int, int]]:
    """The half-open spans (marks included) of the quotations `text` reports (module docstring)."""
    spans = _quotations(text)
    if not spans:
        return []
    own, last = [], 0
    for start, end in spans:
        own.append(text[last:start])
        last = end
    own.append(text[last:])
    if len(_OWN.findall("".join(own))) < MIN_OWN_CHARS:
        return []
    return [(start, end) for start, end in spans
            if REPORTED_BEFORE.search(text[max(0, start - 8):start]) or REPORTED_AFTER.search(text[end:end + 8])]


def in_reported_quotation(hit: LexiconHit, spans: list[tuple[int, int]]) -> bool:
    """Whether `hit` lies wholly inside one of `spans` (from `reported_quotations` of its text)."""
    return any(start < hit.start and hit.end < end for start, end in spans)
