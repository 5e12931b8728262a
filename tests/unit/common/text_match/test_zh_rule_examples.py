"""Every phrase rule in data/zh_rules.json against its own examples: each `hit` text must give a match
whose source is that rule, each `miss` text (a benign lookalike) must give none from it.

Each rule is matched ALONE (a lexicon of that one rule plus the shipped context rules), through the
lexicon's whole path (normalisation, views, target and context checks): two rules hitting the same
span would otherwise hide each other, and a rule that a context rule silences fails here. The miss
examples must also stay clean through the whole default lexicon.
"""

from __future__ import annotations

from functools import lru_cache

import pytest

from services.common.text_match.lexicon import Lexicon
from services.common.text_match.normalize import normalize
from services.common.text_match.zh_context import load_contexts
from services.common.text_match.zh_rules import Rule, load_rules, parse_rules
from tests.stubs import default_lexicon

RULES = load_rules()


@lru_cache(maxsize=1)
def lexicon() -> Lexicon:
    return default_lexicon()


def sources(text: str, lex: Lexicon) -> set[str]:
    return {m.source for m in lex.find(normalize(text))}


@pytest.mark.parametrize("rule", RULES, ids=[r.id for r in RULES])
def test_rule_fires_on_its_hit_examples_and_not_on_its_miss_examples(rule: Rule) -> None:
    assert rule.hits and rule.misses, f"{rule.id}: needs at least one hit and one miss example"
    alone = Lexicon.build([], rules=(rule,), contexts=load_contexts())
    for text in rule.hits:
        assert f"rule:{rule.id}" in sources(text, alone), (rule.id, text)
    for text in rule.misses:
        assert f"rule:{rule.id}" not in sources(text, alone), (rule.id, text)
        assert not [m for m in lexicon().find(normalize(text)) if m.source.startswith("rule:")], (rule.id, text)


def test_examples_must_be_lists_of_strings() -> None:
    base = {"id": "r1", "category": "hate", "pattern": "a"}
    with pytest.raises(ValueError, match=r"x\.json: rules\[0\] \(r1\): examples\.hit"):
        parse_rules({"slots": {}, "rules": [{**base, "examples": {"hit": "a"}}]}, "x.json")
    with pytest.raises(ValueError, match=r"examples: must be an object"):
        parse_rules({"slots": {}, "rules": [{**base, "examples": {"hits": ["a"]}}]}, "x.json")
    (rule,) = parse_rules({"slots": {}, "rules": [{**base, "examples": {"hit": ["a"], "miss": ["b"]}}]}, "x.json")
    assert rule.hits == ("a",) and rule.misses == ("b",)


@pytest.mark.parametrize("text", ["你这头猪，老子弄死你", "菜鸡，我打断你的腿", "楼主这条咸鱼，小心你的狗腿"])
def test_regression_an_insult_beside_a_threat_does_not_veto_it(text: str) -> None:
    # the cooking and gaming vetoes are words (杀鸡, 打怪), not single characters an insult also uses
    assert "violence" in {m.category for m in lexicon().find(normalize(text))}


def test_trigger_index_keeps_every_rule_whose_needs_are_met_in_rule_order() -> None:
    """`_Literals.candidates` only skips rules that `satisfied` would skip (same hits, fewer checks)."""
    from services.common.text_match.zh_rule_literals import satisfied
    from services.common.text_match.zh_rules import _literals

    literals = _literals(RULES)
    texts = [normalize(t).text for rule in RULES for t in (*rule.hits, *rule.misses)]
    skipped = 0
    for text in texts:
        present = literals.present(text)
        candidates = literals.candidates(present)
        expected = [rule for rule in RULES if satisfied(rule.needs, present)]
        assert [r for r in candidates if satisfied(r.needs, present)] == expected, text
        skipped += len(RULES) - len(candidates)
    assert skipped > len(texts) * len(RULES) // 2  # the index does skip most rules on most texts
