"""Reported speech: the quotations a message reports or names rather than says (plain Python).

A listed word or a phrase pattern inside quotation marks is often not the writer's own: "房东在电话里直接说
"不租河南人"，我录音发给街道办了" reports what someone said in order to act on it, "评论区说'菲律宾人骨子里是奴性'，
这种话太过了" rejects it. On the naturalistic Chinese dev fold (session 43) such quoted hits were 22 of the
157 benign messages flagged, and one harmful message of 1,216 had its every hit in a quotation.

A quotation counts as reported here only when all of this holds, so that quotation marks alone are not a
way to pass a word:
- it is a pair of quotation marks (“” ‘’ 「」 『』, or straight double or single quotes) at most
  `MAX_QUOTE_CHARS` characters apart;
- the message has at least `MIN_OWN_CHARS` distinct letters or digits of its own outside every quotation
  (a message that is only a quotation, or a quotation and 哈哈哈, says it);
- a reporting cue stands next to it: a verb of saying, calling, writing or posting just before the opening
  mark (说, 骂, 称, 写, 刷, 贴, 叫过, 号召 ... ; `REPORTED_BEFORE`) whose speaker is not the writer or a crowd
  the writer rallies (我就说, 大家一起刷: `SPEAKER_NOT_REPORTED`), or a demonstrative that takes the quotation
  as an object of talk just after the closing mark (这句话, 这种言论, 之类; `REPORTED_AFTER`).

The text model (services/text/model.py `unreported_hits`) treats a Chinese hit wholly inside a reported
quotation as one its model does not back unless the heads give its category 0.5 or more: a phrase rule's
hit is dropped (the zh rules are patterns like "<group> 都是 ...", which quoting reproduces), and a listed
word stays at most REVIEW (a listed word never goes through silently: services/text/hits.py).

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
#: Distinct letters or digits the message must have outside every quotation to be reporting one (a run of
#: 哈哈哈哈哈哈 is one).
MIN_OWN_CHARS = 6
_MARKS = "".join(sorted(set(QUOTE_PAIRS) | set(QUOTE_PAIRS.values())))
#: Just before the opening mark (at most four other characters between the cue and the mark, none a
#: sentence end or another mark): a verb of saying, calling, writing or posting, or a demonstrative naming a
#: saying (那句 "..."). Not single characters that begin everyday words (发现, 问题, 把握, 叫你).
REPORTED_BEFORE = re.compile(r"(?:说|讲|骂|喊|称|写|刷|贴|叫过|叫做|叫成|号召|声称|宣称|扣|那句|这句|一句|所谓)"
                             rf"[^。！？!?\n{re.escape(_MARKS)}]{{0,4}}$")
#: The writer (or a crowd the writer rallies) as the one who says it is not reporting: 我就说“...”,
#: 大家一起刷“...” (我妈说“...” is: the mother says it). Looked for just before the cue.
SPEAKER_NOT_REPORTED = re.compile(r"(?:我们?|咱们?|大家|一起|都来|快来|赶紧|给我)(?:就|也|要|想|都|还|再|来|先|只|一起|去)?$")
#: Just after the closing mark: the quotation taken as an object of talk (这种话, 这句话, 之类), not as a
#: label for people (“死胖子”这种人 is not reported).
REPORTED_AFTER = re.compile(r"^[\s—\-，,]{0,3}(?:(?:这|那)(?:种|类|些)(?:话|说法|言论|弹幕|评论|论调|观点|词)|(?:这|那)(?:句|话|个词|个说法))"
                            r"|^(?:之类|什么的|的帽子|挂在嘴边|被当成)")
_OWN = re.compile(r"\w")


def _reported_before(before: str) -> bool:
    """Whether the text just before an opening mark reports a saying by someone other than the writer."""
    cue = REPORTED_BEFORE.search(before)
    return cue is not None and SPEAKER_NOT_REPORTED.search(before[:cue.start()]) is None


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
    if len(set(_OWN.findall("".join(own)))) < MIN_OWN_CHARS:
        return []
    return [(start, end) for start, end in spans
            if _reported_before(text[max(0, start - 11):start]) or REPORTED_AFTER.search(text[end:end + 8])]


def in_reported_quotation(hit: LexiconHit, spans: list[tuple[int, int]]) -> bool:
    """Whether `hit` lies wholly inside one of `spans` (from `reported_quotations` of its text)."""
    return any(start < hit.start and hit.end < end for start, end in spans)
