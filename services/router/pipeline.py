"""Moderating one validated item: fan out to the modality services, feed OCR text back through text
moderation, match tenant blocklists, and fuse everything through the policy.

Text parts, the vision model and OCR run concurrently; OCR lines then go through the text service
(stage `ocr_text`). Texts go to the text model(s) the policy's profile picks (services/router/profiles.py):
fast -> `text_moderation`; accurate -> `text_semantic`; balanced -> `text_moderation`, then
`text_semantic` for the texts it escalates (stage `text_semantic` / `ocr_text_semantic`; when that
second pass fails, those texts keep their first-pass scores and the item is degraded). A service that fails or is down becomes a `StageFailure` (the policy decides
fail-open or fail-closed); a deadline that expires fails the whole item with DEADLINE_EXCEEDED and
cancels every stage still queued, so no work is left behind. Under overload, a stage the tenant lets
the router skip (its `degrade` list) is skipped and reported as a degradation.

When the policy or its shadow candidate reads the tenant's own classifier (`tenant_classifier`, pinned to
a version), every text part and readable OCR line also goes to `classifier.<tenant>.<version>` on the text
service (each version the two policies read), concurrently with the text models (stages `classifier` /
`ocr_text_classifier`); its scores are kept apart and only a policy reading that version sees them. The
classifier never fails or delays the item beyond its own share: any error of its call (down, not loaded,
shed, over its time budget of half the item's remaining time) is a `classifier` stage failure that the
policy reading it handles (`failure.classifier`, open by default), and a tenant may let the router skip
it under overload (`degrade: [classifier]`).

When the policy or its shadow matches known content (`matches`) and the router has a match service, every
text part and image also goes to the match service (stage `match`, concurrently with the others). An exact
match of a bank the active policy blocks, with `matches.short_circuit`, ends the stages still running:
the item is answered from what was gathered by then (`Outcome.short_circuited`).

The signals are gathered once and judged by `services.router.evaluate` under the item's policy and,
for a shadow canary, under the candidate policy too (no second model call). Each modality service
names, in every response, the model versions that produced it; the outcome lists those.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field, replace
from typing import Any, Awaitable, Callable, Coroutine, Sequence, TypeVar

from services.common.contracts import classifier as classifier_contract
from services.common.contracts import match as match_contract
from services.common.contracts import ocr as ocr_contract
from services.common.contracts import text as text_contract
from services.common.contracts import vision as vision_contract
from services.common.contracts.rows import MalformedRowError
from services.common.errors import DeadlineExceededError, InvalidRequestError
from services.router.dispatch import MODELS_OUTPUT, ModalityDispatcher, ModelUnloadedError, Row, UpstreamError, models_of
from services.router.evaluate import DEFAULT_LEXICON, MatchableText, evaluate
from services.router.fusion import (CLASSIFIER_STAGES, MATCH_STAGE, RULE_PREFIX, BlockMatch, ClassifierFinding, ImageFinding,
                                   MatchFinding, OcrLineFinding, Signals, StageFailure, TextFinding, Verdict, match_action)
from services.router.policy import CompiledPolicy, Profile
from services.router.profiles import escalated
from services.router.scheduler import Requester
from services.router.validation import ImagePart, ValidItem

T = TypeVar("T")
D = TypeVar("D")
#: The share of an item's remaining time its tenant classifier may take (it runs beside the text models).
CLASSIFIER_SHARE = 0.5
#: The share of an item's remaining time profile balanced's second opinion (`text_semantic`) may take; over
#: it, the texts keep their first-pass scores and the item is degraded (stage `text_semantic`, `failure.text`).
SEMANTIC_SHARE = 0.5
#: The same for the match stage (beside the text, vision and OCR stages).
MATCH_SHARE = 0.5


@dataclass
class Outcome:
    """A verdict plus what produced it."""

    verdict: Verdict
    timings_ms: dict[str, float] = field(default_factory=dict)
    models: list[tuple[str, str]] = field(default_factory=list)
    #: The shadow policy's verdict on the same signals (a shadow canary), else None.
    shadow: Verdict | None = None
    #: True when the verdict was reused from the verdict cache (services/router/cached_pipeline.py).
    cached: bool = False
    #: True when an exact match of a blocking bank ended the other stages early (`matches.short_circuit`).
    short_circuited: bool = False


class _ShortCircuit(Exception):
    """Raised by the match stage to end the item's other stages (an exact match of a blocking bank)."""


@dataclass
class _Collected:
    texts: list[TextFinding] = field(default_factory=list)
    images: list[ImageFinding] = field(default_factory=list)
    ocr_lines: list[OcrLineFinding] = field(default_factory=list)
    failures: list[StageFailure] = field(default_factory=list)
    timings_ms: dict[str, float] = field(default_factory=dict)
    #: Texts the policies' own blocklists are matched against (text parts, readable OCR lines).
    matchable: list[MatchableText] = field(default_factory=list)
    #: Model versions named by the services' responses, per stage ("classifier": the tenant's classifier).
    models: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    #: The tenant classifier's scores, when the policy or its shadow reads them.
    classified: list[ClassifierFinding] = field(default_factory=list)
    #: Bank matches of the item's parts, when the policy or its shadow matches known content.
    matches: list[MatchFinding] = field(default_factory=list)


@dataclass
class _Job:
    """What every stage of one item needs (one per item; `semantic_skipped` is set once)."""

    policy: CompiledPolicy
    deadline: float
    requester: Requester
    collected: _Collected
    #: The profile the texts of this item get (the policy's, or `fast` without a semantic model).
    profile: Profile = "balanced"
    #: Stages the tenant lets the router skip under overload.
    skippable: Sequence[str] = ()
    #: Whether `text_semantic` is skipped for this item under overload (decided once, when first needed).
    semantic_skipped: bool | None = None
    #: The dispatchers of the tenant's classifier versions the policy and its shadow read.
    classifiers: tuple[tuple[str, ModalityDispatcher], ...] = ()


class Pipeline:
    """Runs items through the modality services. One instance serves all requests."""

    def __init__(self, text: ModalityDispatcher, vision: ModalityDispatcher, ocr: ModalityDispatcher, *,
                 text_semantic: ModalityDispatcher | None = None,
                 classifiers: Callable[[str, str], ModalityDispatcher] | None = None,
                 match: ModalityDispatcher | None = None) -> None:
        """`text` serves `text_moderation`, `text_semantic` the semantic model (None: every profile gets
        `text_moderation`, e.g. for a text upstream that serves only it). `classifiers` gives the
        dispatcher of a tenant's own classifier by tenant id and version (ValueError when they cannot name
        one); None: a policy that reads one gets a `classifier` stage failure. `match` serves the model
        `match` (None: no known-content matching; a policy with `matches` gets a `match` stage failure)."""
        self.text, self.vision, self.ocr = text, vision, ocr
        self.text_semantic = text_semantic
        self.classifiers = classifiers
        self.match = match
        #: Model versions each dispatcher's upstream described, by dispatcher name (text, text_semantic, ...).
        self.models: dict[str, list[tuple[str, str]]] = {}

    async def run(self, item: ValidItem, policy: CompiledPolicy, deadline: float, requester: Requester,
                  skippable: Sequence[str] = (), shadow: CompiledPolicy | None = None) -> Outcome:
        """Moderate `item` under `policy` for `requester`, finishing by `deadline` (time.monotonic) or
        raising DeadlineExceededError. InvalidRequestError if a service finds an image undecodable.
        Stages in `skippable` are skipped when their upstream is overloaded. With `shadow`, the same
        signals are also judged under that policy (`Outcome.shadow`)."""
        collected = _Collected()
        profile: Profile = "fast" if self.text_semantic is None else policy.profile
        job = _Job(policy, deadline, requester, collected, profile, skippable)
        versions = classifier_versions(policy, shadow)
        if versions:
            job.classifiers = self._classifiers_for(requester, versions, skippable, collected)
        stages: list[Callable[[], Coroutine[Any, Any, None]]] = []
        if item.texts:
            stages.append(lambda: self._timed("text", collected, self._text_parts(item, job)))
        if item.images:
            if not self._skip("vision", self.vision, requester, skippable, collected):
                stages.append(lambda: self._timed("vision", collected, self._vision(item.images, job)))
            if policy.document.ocr.enabled and not self._skip("ocr", self.ocr, requester, skippable, collected):
                stages.append(lambda: self._ocr_then_text(item.images, job))
        if matches_known_content(policy, shadow) and item.parts:
            if self.match is None:
                collected.failures.append(StageFailure(MATCH_STAGE, "this router has no match service"))
            elif not self._skip(MATCH_STAGE, self.match, requester, skippable, collected):
                stages.append(lambda: self._timed(MATCH_STAGE, collected, self._match(item, job, shadow)))
        short_circuited = False
        try:
            await _concurrently([stage() for stage in stages])
        except _ShortCircuit:
            short_circuited = True
        started = time.monotonic()
        signals = Signals(collected.texts, collected.images, collected.ocr_lines, collected.failures, collected.classified,
                          collected.matches)
        verdict = evaluate(policy, signals, collected.matchable)
        collected.timings_ms["fusion"] = (time.monotonic() - started) * 1000
        shadow_verdict = evaluate(shadow, signals, collected.matchable) if shadow is not None else None
        answered = {stage: models for stage, models in collected.models.items() if not stage.startswith(CLASSIFIER_STAGES[0])}
        self.models.update(answered)  # the versions the services named last (a swap shows here)
        used = [m for stage in (*self._text_models(job), "vision", "ocr") if self._used(stage, item, policy)
                for m in collected.models.get(stage) or ([] if short_circuited else self.models.get(stage, []))]
        use = policy.document.tenant_classifier
        if use is not None:
            used.extend(collected.models.get(f"{CLASSIFIER_STAGES[0]}:{use.version}", []))
        if policy.document.matches is not None and "match" in collected.models:
            used.extend(collected.models["match"])
        return Outcome(verdict, collected.timings_ms, list(dict.fromkeys(used)), shadow_verdict,
                       short_circuited=short_circuited)

    def _classifiers_for(self, requester: Requester, versions: Sequence[str], skippable: Sequence[str],
                         collected: _Collected) -> tuple[tuple[str, ModalityDispatcher], ...]:
        """The dispatchers of the tenant's classifier `versions`; one that cannot be had, or is skipped under
        overload, is a `classifier` stage failure of that version instead."""
        out = []
        for version in versions:
            if self.classifiers is None:
                collected.failures.append(StageFailure(CLASSIFIER_STAGES[0], "this router serves no tenant classifiers",
                                                       version=version))
                continue
            try:
                dispatcher = self.classifiers(requester.tenant, version)
            except ValueError as error:
                collected.failures.append(StageFailure(CLASSIFIER_STAGES[0], str(error), version=version))
                continue
            if CLASSIFIER_STAGES[0] in skippable and dispatcher.overloaded(requester):
                collected.failures.append(StageFailure(CLASSIFIER_STAGES[0], "skipped under overload (classifier queue)",
                                                       skipped=True, version=version))
                continue
            out.append((version, dispatcher))
        return tuple(out)

    def _semantic_for(self, job: _Job) -> ModalityDispatcher | None:
        """The semantic dispatcher, or None when there is none or it is skipped for this item under
        overload (the tenant lists `text_semantic` in `degrade`; reported once as a skipped stage)."""
        semantic = self.text_semantic
        if semantic is None:
            return None
        if job.semantic_skipped is None:
            job.semantic_skipped = self._skip("text_semantic", semantic, job.requester, job.skippable, job.collected)
        return None if job.semantic_skipped else semantic

    def _text_models(self, job: _Job) -> tuple[str, ...]:
        """The text dispatchers whose models answered for this item ("text" = text_moderation)."""
        answered = job.collected.models
        if job.profile == "accurate" and not job.semantic_skipped:
            return ("text_semantic",)
        return ("text", "text_semantic") if "text_semantic" in answered else ("text",)

    @staticmethod
    def _skip(stage: str, dispatcher: ModalityDispatcher, requester: Requester, skippable: Sequence[str],
              collected: _Collected) -> bool:
        if stage in skippable and dispatcher.overloaded(requester):
            collected.failures.append(StageFailure(stage, f"skipped under overload ({stage} queue)", skipped=True))
            return True
        return False

    def uses(self, stage: str, item: ValidItem, policy: CompiledPolicy) -> bool:
        """Whether `item` under `policy` may go through `stage` (text, text_semantic, vision, ocr or match);
        text_semantic whenever text is used and the router has it (which texts go there depends on
        their cheap scores)."""
        if stage == "text_semantic" and self.text_semantic is None:
            return False
        if stage == MATCH_STAGE:
            return self.match is not None and policy.document.matches is not None and bool(item.parts)
        return self._used(stage, item, policy)

    async def _match(self, item: ValidItem, job: _Job, shadow: CompiledPolicy | None) -> None:
        """Every part's bank matches. Never raises for the service (but for cancellation): any error, and a
        call over its budget (half the item's remaining time), is a `match` stage failure. Raises
        _ShortCircuit after an exact match of a bank the active policy blocks, when it short-circuits and
        a shadow candidate (if any) blocks on it too (else the candidate would be judged on partial signals)."""
        assert self.match is not None
        collected, tenant = job.collected, job.requester.tenant
        envelopes = [match_contract.encode_item(tenant, "image", part.data) if isinstance(part, ImagePart)
                     else match_contract.encode_item(tenant, "text", part.text.encode("utf-8")) for part in item.parts]
        # an animation's file by its exact hashes, besides its frames; a match names the part (and frame 0)
        envelopes += [match_contract.encode_item(tenant, "file", part.data) for part in item.animations]
        answered = await _optional_call(self.match, envelopes, job, MATCH_SHARE, match_contract.decode_row,
                                        StageFailure(MATCH_STAGE, ""))
        if answered is None:
            return
        rows, decoded = answered
        for part, (matches, _) in zip((*item.parts, *item.animations), decoded):
            collected.matches.extend(MatchFinding(part.index, m) for m in matches)  # an undecodable image: vision says so
        _note_models(collected, MATCH_STAGE, rows)
        rules = job.policy.document.matches
        if rules is None or not rules.short_circuit:
            return
        deciding = [f.match for f in collected.matches
                    if f.match.distance == 0 and match_action(job.policy.document, f.match) == "block"]
        shadow_blocks = shadow is None or (shadow.document.matches is not None and any(
            match_action(shadow.document, m) == "block" for m in deciding))
        if deciding and shadow_blocks:
            raise _ShortCircuit()

    def _used(self, stage: str, item: ValidItem, policy: CompiledPolicy) -> bool:
        if stage in ("text", "text_semantic"):
            return bool(item.texts) or (bool(item.images) and policy.document.ocr.enabled)
        return bool(item.images) and (stage == "vision" or policy.document.ocr.enabled)

    @staticmethod
    async def _timed(stage: str, collected: _Collected, work: Awaitable[T]) -> T:
        started = time.monotonic()
        try:
            return await work
        finally:
            collected.timings_ms[stage] = (time.monotonic() - started) * 1000

    async def _guarded(self, stage: str, collected: _Collected, work: Awaitable[None]) -> bool:
        """Run `work`; an UpstreamError becomes a StageFailure. Returns True on success."""
        try:
            await work
            return True
        except UpstreamError as error:
            collected.failures.append(StageFailure(stage, str(error), unloaded=isinstance(error, ModelUnloadedError)))
            return False

    async def _text_parts(self, item: ValidItem, job: _Job) -> None:
        texts = [(part.index, part.text, -1) for part in item.texts]
        await self._guarded("text", job.collected, self._score_texts(texts, job))
        job.collected.matchable.extend(texts)

    async def _score_texts(self, texts: list[MatchableText], job: _Job, stage: str = "text") -> None:
        """Score `texts` by the job's profile and add their findings. `stage` ("text" or "ocr_text") names
        the first pass; a failed balanced second pass is the stage `<stage>_semantic`. With the job's
        tenant classifier, it scores the same texts concurrently (stage `classifier` / `ocr_text_classifier`)."""
        if not job.classifiers:
            await self._score_by_models(texts, job, stage)
            return
        classifier_stage = CLASSIFIER_STAGES[0] if stage == "text" else CLASSIFIER_STAGES[1]
        await _concurrently([self._score_by_models(texts, job, stage),
                             *(self._classify(version, dispatcher, texts, job, classifier_stage)
                               for version, dispatcher in job.classifiers)])

    async def _classify(self, version: str, classifier: ModalityDispatcher, texts: Sequence[MatchableText], job: _Job,
                        stage: str) -> None:
        """The tenant classifier's scores for `texts`. Never raises (but for cancellation): any error, and a call
        over its budget (half the item's remaining time), is the stage `stage` failing for `version`."""
        collected = job.collected
        started = time.monotonic()
        answered = await _optional_call(classifier, [text.encode("utf-8") for _, text, _ in texts], job, CLASSIFIER_SHARE,
                                        classifier_contract.decode_row, StageFailure(stage, "", version=version))
        collected.timings_ms[stage] = max(collected.timings_ms.get(stage, 0.0), (time.monotonic() - started) * 1000)
        if answered is not None:
            rows, decoded = answered
            collected.classified.extend(ClassifierFinding(part_index, line, text, classifier.upstream.model, version, scores)
                                        for (part_index, text, line), scores in zip(texts, decoded))
            _note_models(collected, f"{CLASSIFIER_STAGES[0]}:{version}", rows)

    async def _score_by_models(self, texts: list[MatchableText], job: _Job, stage: str) -> None:
        """Score `texts` by the text model(s) of the job's profile (see `_score_texts`)."""
        first = (self._semantic_for(job) if job.profile == "accurate" else None) or self.text
        rows = await self._text_rows(first, texts, job)
        policy = job.policy
        again = escalated(job.profile, rows, policy.document.balanced, policy.acting_categories)
        semantic = self._semantic_for(job) if again else None
        if again and semantic is not None:
            second_stage = f"{stage}_semantic"

            async def second() -> None:
                # a second opinion gets at most SEMANTIC_SHARE of the item's remaining time: when the semantic
                # model is saturated (another tenant's accurate-profile flood), the item is answered on its
                # first pass, degraded, before its deadline, instead of not at all
                now = time.monotonic()
                budget = min(job.deadline, now + max(0.0, job.deadline - now) * SEMANTIC_SHARE)
                try:
                    better = await self._text_rows(semantic, [texts[i] for i in again], job, deadline=budget)
                except DeadlineExceededError:
                    if time.monotonic() >= job.deadline:
                        raise
                    job.collected.failures.append(StageFailure(second_stage, "over its time budget"))
                    return
                for index, row in zip(again, better):
                    rows[index] = row
            await self._timed(second_stage, job.collected, self._guarded(second_stage, job.collected, second()))
        job.collected.texts.extend(text_finding(text, row) for text, row in zip(texts, rows))

    async def _text_rows(self, dispatcher: ModalityDispatcher, texts: Sequence[MatchableText], job: _Job,
                         deadline: float | None = None) -> list[text_contract.TextRow]:
        """`dispatcher`'s typed rows for `texts` (its models noted under its name), by `deadline` (default the
        item's)."""
        rows = await dispatcher.submit(job.requester, [text.encode("utf-8") for _, text, _ in texts],
                                       job.deadline if deadline is None else deadline)
        _note_models(job.collected, dispatcher.modality, rows)
        return _decoded(rows, text_contract.decode_row)

    async def _vision(self, images: list[ImagePart], job: _Job) -> None:
        collected = job.collected

        async def score() -> None:
            rows = await self.vision.submit(job.requester, [image.data for image in images], job.deadline)
            for image, row in zip(images, _decoded(rows, vision_contract.decode_row)):
                _raise_if_rejected(image, row.error)
                collected.images.append(ImageFinding(image.index, self.vision.upstream.model, row.scores))
            _note_models(collected, "vision", rows)
        await self._guarded("vision", collected, score())

    async def _ocr_then_text(self, images: list[ImagePart], job: _Job) -> None:
        lines: list[OcrLineFinding] = []
        policy, collected = job.policy, job.collected

        async def read() -> None:
            rows = await self.ocr.submit(job.requester, [image.data for image in images], job.deadline)
            for image, row in zip(images, _decoded(rows, ocr_contract.decode_row)):
                _raise_if_rejected(image, row.error)
                for index, line in enumerate(row.lines):
                    lines.append(OcrLineFinding(image.index, index, line.text, line.confidence, line.polygon))
            _note_models(collected, "ocr", rows)

        ok = await self._timed("ocr", collected, self._guarded("ocr", collected, read()))
        collected.ocr_lines.extend(lines)
        readable = [(l.part_index, l.text, l.line_index) for l in lines
                    if l.confidence >= policy.document.ocr.min_confidence and l.text.strip()]
        if ok and readable:
            await self._timed("ocr_text", collected,
                              self._guarded("ocr_text", collected, self._score_texts(readable, job, "ocr_text")))
            collected.matchable.extend(readable)


def matches_known_content(policy: CompiledPolicy, shadow: CompiledPolicy | None) -> bool:
    """Whether `policy` or its shadow candidate matches known content (`matches`)."""
    return policy.document.matches is not None or (shadow is not None and shadow.document.matches is not None)


def classifier_versions(policy: CompiledPolicy, shadow: CompiledPolicy | None) -> tuple[str, ...]:
    """The tenant classifier versions `policy` and its shadow candidate read (none, one or two)."""
    uses = [p.document.tenant_classifier for p in (policy, shadow) if p is not None]
    return tuple(dict.fromkeys(use.version for use in uses if use is not None))


async def _optional_call(dispatcher: ModalityDispatcher, payloads: Sequence[bytes], job: _Job, share: float,
                         decode: Callable[[Row], D], failure: StageFailure) -> tuple[list[Row], list[D]] | None:
    """Call a stage that only adds signals (a tenant classifier, the match service): its rows and their typed
    form, or None after recording `failure` (its reason filled in). It gets at most `share` of the item's
    remaining time and never raises for the service (but for cancellation): the policy's failure mode for
    that stage decides, not the item."""
    started = time.monotonic()
    deadline = min(job.deadline, started + max(0.0, job.deadline - started) * share)
    try:
        rows = await dispatcher.submit(job.requester, payloads, deadline)
        return rows, _decoded(rows, decode)
    except asyncio.CancelledError:
        raise
    except Exception as error:
        job.collected.failures.append(replace(failure, reason=_stage_reason(error),
                                              unloaded=isinstance(error, ModelUnloadedError)))
        return None


def _stage_reason(error: Exception) -> str:
    """A stage failure's reason for a failed call of an optional stage (classifier, match): never an
    unexpected error's own message."""
    if isinstance(error, UpstreamError):
        return str(error)
    if isinstance(error, DeadlineExceededError):
        return "over its time budget"
    return f"failed ({type(error).__name__})"


async def _concurrently(work: Sequence[Coroutine[Any, Any, None]]) -> None:
    """Run `work` together; the first error cancels the rest and is raised as itself. One item runs inline
    (no task of its own: the common text-only item)."""
    if len(work) == 1:
        await work[0]
    elif work:
        try:
            async with asyncio.TaskGroup() as group:
                for coroutine in work:
                    group.create_task(coroutine)
        except BaseExceptionGroup as group_error:
            raise group_error.exceptions[0] from None


def text_finding(text: MatchableText, row: text_contract.TextRow) -> TextFinding:
    """The finding of one text part or OCR line from its typed row (also used by bench/quality.py)."""
    part_index, content, line = text
    # Every default-lexicon hit is kept; `evaluate` drops them for a policy that does not use it. A rule
    # hit (source `rule:<id>`) is the model's own signal, not the lexicon's: it is kept under its rule.
    matches = [BlockMatch(m.category, m.term, m.severity, m.start, m.end, m.text,
                          m.source if m.source.startswith(RULE_PREFIX) else DEFAULT_LEXICON, max_action=m.max_action)
               for m in row.matches]
    return TextFinding(part_index, content, row.scores, matches, line, evidence=row.evidence,
                       subcategories=row.subcategories)


def _note_models(collected: _Collected, stage: str, rows: Sequence[dict[str, Any]]) -> None:
    """Record the model versions a service named in its response (see dispatch.MODELS_OUTPUT)."""
    if rows and MODELS_OUTPUT in rows[0]:
        collected.models[stage] = models_of(rows[0])


def _decoded(rows: Sequence[Row], decode: Callable[[Row], D]) -> list[D]:
    """Typed rows by the modality's contract; a row that breaks it fails the stage (UpstreamError)."""
    try:
        return [decode(row) for row in rows]
    except MalformedRowError as error:
        raise UpstreamError(f"malformed response: {error}") from None


def _raise_if_rejected(image: ImagePart, error: str) -> None:
    if error:
        raise InvalidRequestError(f"{image.field}.image: {error}")
