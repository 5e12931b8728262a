"""Moderating one validated item: fan out to the modality services, feed OCR text back through text
moderation, match tenant blocklists, and fuse everything through the policy.

Text parts, the vision model and OCR run concurrently; OCR lines then go through the text service
(stage `ocr_text`). A service that fails or is down becomes a `StageFailure` (the policy decides
fail-open or fail-closed); a deadline that expires fails the whole item with DEADLINE_EXCEEDED and
cancels every stage still queued, so no work is left behind. Under overload, a stage the tenant lets
the router skip (its `degrade` list) is skipped and reported as a degradation.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Coroutine, Sequence, TypeVar

from services.common.errors import InvalidRequestError
from services.router.dispatch import ModalityDispatcher, UpstreamError
from services.router.fusion import (BlockMatch, ImageFinding, OcrLineFinding, Signals, StageFailure, TextFinding,
                                    Verdict, fuse)
from services.router.policy import CompiledPolicy
from services.router.scheduler import Requester
from services.router.validation import ImagePart, ValidItem
from services.text.normalize import normalize

T = TypeVar("T")
DEFAULT_LEXICON = "default"


@dataclass
class Outcome:
    """A verdict plus what produced it."""

    verdict: Verdict
    timings_ms: dict[str, float] = field(default_factory=dict)
    models: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class _Collected:
    texts: list[TextFinding] = field(default_factory=list)
    images: list[ImageFinding] = field(default_factory=list)
    ocr_lines: list[OcrLineFinding] = field(default_factory=list)
    failures: list[StageFailure] = field(default_factory=list)
    timings_ms: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class _Job:
    """What every stage of one item needs."""

    policy: CompiledPolicy
    deadline: float
    requester: Requester
    collected: _Collected


class Pipeline:
    """Runs items through the modality services. One instance serves all requests."""

    def __init__(self, text: ModalityDispatcher, vision: ModalityDispatcher, ocr: ModalityDispatcher) -> None:
        self.text, self.vision, self.ocr = text, vision, ocr
        self.models: dict[str, list[tuple[str, str]]] = {}

    async def run(self, item: ValidItem, policy: CompiledPolicy, deadline: float, requester: Requester,
                  skippable: Sequence[str] = ()) -> Outcome:
        """Moderate `item` under `policy` for `requester`, finishing by `deadline` (time.monotonic) or
        raising DeadlineExceededError. InvalidRequestError if a service finds an image undecodable.
        Stages in `skippable` are skipped when their upstream is overloaded."""
        collected = _Collected()
        job = _Job(policy, deadline, requester, collected)
        stages: list[Callable[[], Coroutine[Any, Any, None]]] = []
        if item.texts:
            stages.append(lambda: self._timed("text", collected, self._text_parts(item, job)))
        if item.images:
            if not self._skip("vision", self.vision, requester, skippable, collected):
                stages.append(lambda: self._timed("vision", collected, self._vision(item.images, job)))
            if policy.document.ocr.enabled and not self._skip("ocr", self.ocr, requester, skippable, collected):
                stages.append(lambda: self._ocr_then_text(item.images, job))
        try:
            async with asyncio.TaskGroup() as group:
                for stage in stages:
                    group.create_task(stage())
        except BaseExceptionGroup as group_error:
            raise group_error.exceptions[0] from None
        started = time.monotonic()
        verdict = fuse(policy, Signals(collected.texts, collected.images, collected.ocr_lines, collected.failures))
        collected.timings_ms["fusion"] = (time.monotonic() - started) * 1000
        used = [m for stage in ("text", "vision", "ocr") if self._used(stage, item, policy) for m in self.models.get(stage, [])]
        return Outcome(verdict, collected.timings_ms, used)

    @staticmethod
    def _skip(stage: str, dispatcher: ModalityDispatcher, requester: Requester, skippable: Sequence[str],
              collected: _Collected) -> bool:
        if stage in skippable and dispatcher.overloaded(requester):
            collected.failures.append(StageFailure(stage, f"skipped under overload ({stage} queue)", skipped=True))
            return True
        return False

    def _used(self, stage: str, item: ValidItem, policy: CompiledPolicy) -> bool:
        if stage == "text":
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
            collected.failures.append(StageFailure(stage, str(error)))
            return False

    async def _text_parts(self, item: ValidItem, job: _Job) -> None:
        texts = [(part.index, part.text, -1) for part in item.texts]
        await self._guarded("text", job.collected, self._score_texts(texts, job))
        self._match_custom(texts, job.policy, job.collected)

    async def _score_texts(self, texts: list[tuple[int, str, int]], job: _Job) -> None:
        rows = await self.text.submit(job.requester, [text.encode("utf-8") for _, text, _ in texts], job.deadline)
        use_default = job.policy.document.blocklist.use_default_lexicon
        collected = job.collected
        for (part_index, text, line), row in zip(texts, rows):
            matches = [BlockMatch(m["category"], m["term"], int(m["severity"]), int(m["start"]), int(m["end"]), m["text"],
                                  DEFAULT_LEXICON) for m in json.loads(row["MATCHES"][0])] if use_default else []
            scores = {"hate": float(row["TOXICITY"][0]), "spam": float(row["SPAM"][0])}
            collected.texts.append(TextFinding(part_index, text, scores, matches, line))

    @staticmethod
    def _match_custom(texts: list[tuple[int, str, int]], policy: CompiledPolicy, collected: _Collected) -> None:
        lexicon = policy.custom_lexicon
        if lexicon is None:
            return
        for part_index, text, line in texts:
            matches = [BlockMatch(m.category, m.term, m.severity, m.start, m.end, m.matched_text, f"policy:{policy.name}")
                       for m in lexicon.find(normalize(text))]
            if matches:
                collected.texts.append(TextFinding(part_index, text, {}, matches, line))

    async def _vision(self, images: list[ImagePart], job: _Job) -> None:
        collected = job.collected

        async def score() -> None:
            rows = await self.vision.submit(job.requester, [image.data for image in images], job.deadline)
            for image, row in zip(images, rows):
                _raise_if_rejected(image, row)
                scores = {"sexual": float(row["SEXUAL"][0]), "violence": float(row["VIOLENCE"][0])}
                collected.images.append(ImageFinding(image.index, self.vision.upstream.model, scores))
        await self._guarded("vision", collected, score())

    async def _ocr_then_text(self, images: list[ImagePart], job: _Job) -> None:
        lines: list[OcrLineFinding] = []
        policy, collected = job.policy, job.collected

        async def read() -> None:
            rows = await self.ocr.submit(job.requester, [image.data for image in images], job.deadline)
            for image, row in zip(images, rows):
                _raise_if_rejected(image, row)
                for index, line in enumerate(json.loads(row["LINES"][0])):
                    polygon = tuple((int(x), int(y)) for x, y in line["polygon"])
                    lines.append(OcrLineFinding(image.index, index, line["text"], float(line["confidence"]), polygon))

        ok = await self._timed("ocr", collected, self._guarded("ocr", collected, read()))
        collected.ocr_lines.extend(lines)
        readable = [(l.part_index, l.text, l.line_index) for l in lines
                    if l.confidence >= policy.document.ocr.min_confidence and l.text.strip()]
        if ok and readable:
            await self._timed("ocr_text", collected, self._guarded("ocr_text", collected, self._score_texts(readable, job)))
            self._match_custom(readable, policy, collected)


def _raise_if_rejected(image: ImagePart, row: dict[str, Any]) -> None:
    error = row["ERROR"][0]
    if error:
        message = error.decode("utf-8", "replace") if isinstance(error, bytes) else str(error)
        raise InvalidRequestError(f"parts[{image.index}].image: {message}")
