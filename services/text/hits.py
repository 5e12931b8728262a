"""What happens to a lexicon or rule hit that its text's model did not back (plain Python).

Both text models drop such a hit: `text_semantic` an English hit whose category MiniLM's heads score
below the corroboration floor (services/text/semantic.py), the fast model a Chinese hit in a text the
Chinese harm gate closed on (services/text/multilingual.py). The lexicon's top tier of hate and sexual
entries (severity 3: slurs, child-exploitation terms) never drops out: such a hit is kept and capped at
REVIEW, so a slur wrapped in friendly words goes to a person, not through. The Chinese gate keeps every
Chinese lexicon entry at REVIEW (an insult appended to a benign message shares the window the gate reads,
so the gate must not be a way to pass it) and drops a Chinese phrase rule's hit whatever its severity:
the zh rules are patterns ("<group> 都是 ..."), and benign messages that quote or reject them were most of
what the gate let through otherwise. A Chinese hit inside a quotation its text reports (someone's words
quoted to report or reject them, services/text/reported.py) is unbacked unless the heads give its category
0.5 (services/text/model.py `unreported_hits`).

Example::

    >>> slur = LexiconHit("hate", "<slur>", 3, 0, 6, "<slur>")
    >>> unbacked(slur).max_action, unbacked(LexiconHit("sexual", "tit", 1, 8, 11, "tit"))
    ('review', None)
"""

from __future__ import annotations

from dataclasses import replace

from services.common.contracts.text import LexiconHit
from services.common.text_match.scripts import has_cjk

__all__ = ["RULE_PREFIX", "UNCORROBORATED_CATEGORIES", "UNCORROBORATED_SEVERITY", "chinese_term", "gate_reads", "unbacked"]

#: hits of these categories at this severity (the lexicon's top tier: slurs, child-exploitation terms)
#: never drop out; unbacked they may at most REVIEW. Threats are not among them: "I will kill you" at
#: chess is the model's to judge.
UNCORROBORATED_SEVERITY = 3
UNCORROBORATED_CATEGORIES = frozenset({"hate", "sexual"})
#: The source of a context rule's hit starts with this (`rule:<id>`).
RULE_PREFIX = "rule:"


def chinese_term(hit: LexiconHit) -> bool:
    """True for a hit of a Chinese entry (its term has CJK characters): in a text without CJK it was
    matched in the pinyin or pinyin-initial space ("nmsl" for 你妈死了), Chinese written in Latin
    letters, which the English heads cannot read.

    Example::

        >>> chinese_term(LexiconHit("harassment", "你妈死了", 3, 0, 4, "nmsl"))
        True
        >>> chinese_term(LexiconHit("profanity", "sb", 2, 0, 2, "sb"))
        False
    """
    return has_cjk(hit.term)


def gate_reads(hit: LexiconHit) -> bool:
    """Whether the Chinese harm gate may judge `hit`: it matched Chinese characters the gate read (not
    pinyin or Latin letters standing for a Chinese entry: "nmsl" beside "哈哈"), and it is a Chinese lexicon
    entry or a Chinese phrase rule (whose term is `rule:<id>`), not an English context rule whose word
    gap happened to span a Chinese word ("i will 狠狠 kill you").

    Example::

        >>> gate_reads(LexiconHit("harassment", "你妈死了", 3, 0, 4, "nmsl"))
        False
        >>> gate_reads(LexiconHit("hate", "rule:hate-group-is", 3, 0, 5, "河南人都是", "rule:hate-group-is"))
        True
        >>> gate_reads(LexiconHit("violence", "i will 狠狠 kill", 3, 0, 14, "i will 狠狠 kill", "rule:threat_first_person"))
        False
    """
    if not has_cjk(hit.text):
        return False
    if hit.source.startswith(RULE_PREFIX):
        return hit.term.startswith(RULE_PREFIX)
    return has_cjk(hit.term)


def unbacked(hit: LexiconHit, *, rules_too: bool = True, every_entry: bool = False) -> LexiconHit | None:
    """What is left of a hit its model did not back: None, or for a top-tier hate or sexual hit the hit
    capped at REVIEW (module docstring). `rules_too` False: a context rule's hit (`rule:<id>`, a phrase
    pattern, not a listed word) is dropped whatever its severity. `every_entry`: every lexicon entry is kept
    at REVIEW, not only the top tier (what the Chinese harm gate does: a listed word never goes through
    silently, the gate only decides whether it blocks).

    Example::

        >>> rule = LexiconHit("hate", "群体 是", 3, 0, 4, "某群体都是", "rule:hate-group-is")
        >>> unbacked(rule).max_action, unbacked(rule, rules_too=False)
        ('review', None)
    """
    if not rules_too and hit.source.startswith(RULE_PREFIX):
        return None
    if every_entry or (hit.severity >= UNCORROBORATED_SEVERITY and hit.category in UNCORROBORATED_CATEGORIES):
        return replace(hit, max_action="review")
    return None
