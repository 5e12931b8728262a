"""What happens to a lexicon or rule hit that its text's model did not back (plain Python).

Both text models drop such a hit: `text_semantic` an English hit whose category MiniLM's heads score
below the corroboration floor (services/text/semantic.py), the fast model a Chinese hit in a text the
Chinese harm gate closed on (services/text/multilingual.py). The lexicon's top tier of hate and sexual
entries (severity 3: slurs, child-exploitation terms) never drops out: such a hit is kept and capped at
REVIEW, so a slur wrapped in friendly words goes to a person, not through. The gate drops a Chinese
context rule's hit whatever its severity: the zh rules are phrase patterns ("<group> 都是 ..."), and
benign messages that quote or reject them were most of what the gate let through otherwise.

Example::

    >>> slur = LexiconHit("hate", "<slur>", 3, 0, 6, "<slur>")
    >>> unbacked(slur).max_action, unbacked(LexiconHit("sexual", "tit", 1, 8, 11, "tit"))
    ('review', None)
"""

from __future__ import annotations

from dataclasses import replace

from services.common.contracts.text import LexiconHit
from services.common.text_match.scripts import has_cjk

__all__ = ["UNCORROBORATED_CATEGORIES", "UNCORROBORATED_SEVERITY", "chinese_term", "unbacked"]

#: hits of these categories at this severity (the lexicon's top tier: slurs, child-exploitation terms)
#: never drop out; unbacked they may at most REVIEW. Threats are not among them: "I will kill you" at
#: chess is the model's to judge.
UNCORROBORATED_SEVERITY = 3
UNCORROBORATED_CATEGORIES = frozenset({"hate", "sexual"})
#: The source of a context rule's hit starts with this (`rule:<id>`).
RULE_PREFIX = "rule:"


def chinese_term(hit: LexiconHit) -> bool:
    """True for a hit of a Chinese entry or rule: its term or the text it matched has CJK characters. In a
    text without CJK it was matched in the pinyin or pinyin-initial space ("nmsl" for 你妈死了), Chinese
    written in Latin letters, which the English heads cannot read; in a Chinese text a rule hit's term is
    its words ("rule" hits keep the surface text they matched).

    Example::

        >>> chinese_term(LexiconHit("harassment", "你妈死了", 3, 0, 4, "nmsl"))
        True
        >>> chinese_term(LexiconHit("violence", "顺着网线 掐死你", 3, 0, 8, "顺着网线过去掐死你", "rule:vio-kill-addr"))
        True
        >>> chinese_term(LexiconHit("profanity", "sb", 2, 0, 2, "sb"))
        False
    """
    return has_cjk(hit.term) or has_cjk(hit.text)


def unbacked(hit: LexiconHit, *, rules_too: bool = True) -> LexiconHit | None:
    """What is left of a hit its model did not back: None, or for a top-tier hate or sexual hit the hit
    capped at REVIEW (module docstring). `rules_too` False: only a lexicon entry is kept so, a context
    rule's hit (`rule:<id>`, a phrase pattern, not a listed slur) is dropped like the others.

    Example::

        >>> rule = LexiconHit("hate", "群体 是", 3, 0, 4, "某群体都是", "rule:hate-group-is")
        >>> unbacked(rule).max_action, unbacked(rule, rules_too=False)
        ('review', None)
    """
    if not rules_too and hit.source.startswith(RULE_PREFIX):
        return None
    if hit.severity >= UNCORROBORATED_SEVERITY and hit.category in UNCORROBORATED_CATEGORIES:
        return replace(hit, max_action="review")
    return None
