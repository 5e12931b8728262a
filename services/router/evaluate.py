"""Judging the signals gathered for one item under a policy. Pure.

The pipeline gathers the model scores and the default-lexicon hits once, independently of the
policy's blocklist settings; `evaluate` then applies what is policy-specific (whether the default
lexicon counts, the policy's own blocklists, matched with its prebuilt automaton) and fuses. So the
same signals can be judged under a second policy (a shadow canary) without calling any model again.

Example::

    verdict = evaluate(policy, signals, [(0, "buy megacorp sucks", -1)])
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from services.router.fusion import BlockMatch, Signals, TextFinding, Verdict, fuse
from services.router.policy import CompiledPolicy
from services.common.text_match.normalize import normalize

#: The lexicon name of hits from the text service's shipped (default) lexicon.
DEFAULT_LEXICON = "default"

#: A text the policy's own blocklists are matched against: (part index, text, OCR line or -1).
MatchableText = tuple[int, str, int]


def evaluate(policy: CompiledPolicy, signals: Signals, texts: Sequence[MatchableText]) -> Verdict:
    """Fuse `signals` under `policy`, after applying its blocklist rules to them and to `texts`."""
    return fuse(policy, signals_for(policy, signals, texts))


def signals_for(policy: CompiledPolicy, signals: Signals, texts: Sequence[MatchableText]) -> Signals:
    """`signals` as `policy` sees them: default-lexicon hits dropped unless it uses the default
    lexicon, and its own blocklist hits added."""
    findings = list(signals.texts)
    if not policy.document.blocklist.use_default_lexicon:
        findings = [replace(f, matches=[m for m in f.matches if m.source != DEFAULT_LEXICON]) for f in findings]
    return replace(signals, texts=[*findings, *custom_findings(policy, texts)])


def custom_findings(policy: CompiledPolicy, texts: Sequence[MatchableText]) -> list[TextFinding]:
    """Hits of the policy's own blocklists (its Aho-Corasick automaton) in `texts`."""
    lexicon = policy.custom_lexicon
    if lexicon is None:
        return []
    findings = []
    for part_index, text, line in texts:
        matches = [BlockMatch(m.category, m.term, m.severity, m.start, m.end, m.matched_text, f"policy:{policy.name}")
                   for m in lexicon.find(normalize(text))]
        if matches:
            findings.append(TextFinding(part_index, text, {}, matches, line))
    return findings
