"""A normalised view that keeps clause punctuation, for the phrase rules (zh_rules.py).

`normalize()` removes every separator between two CJK characters, so that 傻.逼 and 丑、八、怪 match;
it also removes the commas and full stops between clauses (操，又掉线了 becomes 操又掉线了), and
rules need those: 操 as an exclamation is a clause of its own, and a frame should not run across
two clauses. The clause view splits the original text at clause punctuation, normalises each clause
on its own (so separator, zero-width, repetition and traditional-script evasions inside a clause are
still folded) and joins the clauses with "，" (which maps back to the punctuation it replaced).
The enumeration comma 、 is not a clause break: evaders use it between characters (丑、八、怪).

Example::

    >>> view = clause_normalize("操，又掉线了")
    >>> view.text, view.original_span(2, 6)
    ('操，又掉线了', (2, 6))
"""

from __future__ import annotations

import re

from services.common.text_match.normalize import NormalizedText, normalize

__all__ = ["clause_normalize"]

_BREAK = re.compile(r"[，。！？；：,!?;:\n]+")


def clause_normalize(text: str) -> NormalizedText:
    """`normalize(text)` clause by clause, the clauses joined by "，" (see the module docstring)."""
    if not _BREAK.search(text):
        return normalize(text)
    pieces: list[str] = []
    offsets: list[int] = []
    position = 0
    for match in [*_BREAK.finditer(text), None]:
        end = match.start() if match is not None else len(text)
        clause = normalize(text[position:end])
        if clause.text:
            if pieces and pieces[-1] != "，":
                pieces.append("，")
                offsets.append(position - 1)
            pieces.append(clause.text)
            offsets.extend(position + o for o in clause.offsets)
        if match is None:
            break
        position = match.end()
    joined = "".join(pieces)
    return NormalizedText(joined, tuple(offsets), text)
