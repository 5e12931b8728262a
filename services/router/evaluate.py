"""Judging the signals gathered for one item under a policy. Pure.

The pipeline gathers the model scores and the default-lexicon hits once, independently of the
policy's blocklist settings; `evaluate` then applies what is policy-specific (whether the default
lexicon counts, the policy's own blocklists, matched with its prebuilt automaton, whether and how the
tenant's own classifier counts) and fuses. So the same signals can be judged under a second policy (a
shadow canary) without calling any model again: a candidate policy that turns the tenant's classifier
on is judged with its scores while the active one, without it, ignores them (and its failures).

Example::

    verdict = evaluate(policy, signals, [(0, "buy megacorp sucks", -1)])
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from services.common.contracts.text import EvidenceSpan
from services.common.taxonomy import TEXT_CATEGORIES, is_custom_category, is_well_formed_custom_category
from services.router.fusion import (CLASSIFIER_STAGES, MATCH_STAGE, BlockMatch, ClassifierFinding, Signals, TextFinding,
                                   Verdict, fuse)
from services.router.policy import CompiledPolicy, TenantClassifierUse
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
    lexicon, the tenant classifier's scores merged in when it uses that (else they and the classifier's
    failures are dropped), and its own blocklist hits added."""
    findings = list(signals.texts)
    failures = signals.failures
    if not policy.document.blocklist.use_default_lexicon:
        findings = [replace(f, matches=[m for m in f.matches if m.source != DEFAULT_LEXICON]) for f in findings]
    use = policy.document.tenant_classifier
    if use is not None:
        findings = with_classifier(findings, [c for c in signals.classified if c.version == use.version], use)
    failures = [failure for failure in failures
                if failure.stage not in CLASSIFIER_STAGES or (use is not None and failure.version == use.version)]
    matches = signals.matches
    if policy.document.matches is None:  # this policy does not match known content: its matches and failures go
        matches = ()
        failures = [failure for failure in failures if failure.stage != MATCH_STAGE]
    return replace(signals, texts=[*findings, *custom_findings(policy, texts)], failures=failures, classified=(),
                   matches=matches)


def with_classifier(findings: Sequence[TextFinding], classified: Sequence[ClassifierFinding],
                    use: TenantClassifierUse) -> list[TextFinding]:
    """`findings` with the tenant classifier's scores merged in by `use.mode` (see TenantClassifierUse).

    Where the classifier's score is the one taken, the category's evidence is the whole text, its
    source the classifier's model name (the text model's spans for that category are dropped). A text
    the classifier scored but the text models did not (their stage failed) gets a finding of its own.
    Categories that are neither built-in text categories nor well-formed custom ones are ignored.
    Rule and blocklist hits are left as they are: `replace` replaces the shipped model's score only.
    """
    by_text = {(c.part_index, c.ocr_line): c for c in classified}
    merged: list[TextFinding] = []
    for finding in findings:
        extra = by_text.pop((finding.part_index, finding.ocr_line), None)
        merged.append(finding if extra is None else _merged(finding, extra, use))
    for extra in by_text.values():
        merged.append(_merged(TextFinding(extra.part_index, extra.text, {}, (), extra.ocr_line), extra, use))
    return merged


def _merged(finding: TextFinding, extra: ClassifierFinding, use: TenantClassifierUse) -> TextFinding:
    scores = dict(finding.scores)
    evidence = list(finding.evidence)
    whole = len(finding.text)
    for category, score in sorted(extra.scores.items()):
        if category not in TEXT_CATEGORIES and not is_well_formed_custom_category(category):
            continue
        taken = use.mode == "replace" or is_custom_category(category) or score > scores.get(category, 0.0)
        if taken:
            scores[category] = score
            evidence = [span for span in evidence if span.category != category]
            if whole:
                evidence.append(EvidenceSpan(category, 0, whole, score, extra.model))
    # The shipped models' scores stay beside a replaced one: the floor of `sexual/minors` reads them.
    shipped = dict(finding.scores) if use.mode == "replace" and finding.scores else finding.shipped_scores
    return replace(finding, scores=scores, evidence=evidence, shipped_scores=shipped)


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
