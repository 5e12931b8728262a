"""Judging one item's signals under a policy: its own blocklist automaton, whether the default lexicon
counts; the same signals judged under a second (shadow) policy."""

from __future__ import annotations

from services.router.evaluate import DEFAULT_LEXICON, evaluate
from services.router.fusion import BlockMatch, Signals, TextFinding, TextSpanEvidence
from services.router.policy import BlocklistRules, CompiledPolicy, CustomBlocklist, PolicyDocument, Thresholds, compile_policy

TEXT = "buy the Bluefin tuna, idiot"
SIGNALS = Signals(texts=[TextFinding(0, TEXT, {"hate": 0.3}, [BlockMatch("profanity", "idiot", 2, 22, 27, "idiot", DEFAULT_LEXICON)])])


def policy(version: str, *, terms: tuple[str, ...] = (), use_default: bool = True) -> CompiledPolicy:
    custom = {"fish": CustomBlocklist(terms)} if terms else {}
    return compile_policy(PolicyDocument("p", version, categories={"hate": Thresholds(0.5, 0.9)},
                                         blocklist=BlocklistRules(use_default_lexicon=use_default, custom=custom)))


def test_each_policy_applies_its_own_blocklist_to_the_same_signals() -> None:
    baseline = evaluate(policy("1", use_default=False), SIGNALS, [(0, TEXT, -1)])
    candidate = evaluate(policy("2", terms=("bluefin",)), SIGNALS, [(0, TEXT, -1)])
    assert baseline.decision == "allow"  # the default-lexicon hit does not count for this policy
    assert candidate.decision == "block"
    categories = {c.category: c.action for c in candidate.categories}
    assert categories["custom.fish"] == "block" and categories["profanity"] == "block"
    spans = [e for e in candidate.evidence if isinstance(e, TextSpanEvidence) and e.category == "custom.fish"]
    assert [(e.start, e.end, e.lexicon) for e in spans] == [(8, 15, "policy:p")]  # original offsets
