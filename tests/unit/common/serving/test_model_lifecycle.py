"""Hot model reload with fakes: load beside the old, verify, warm up, switch, drain the old; a failed
load keeps the old version serving; unload; index states."""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pytest

from services.common.errors import NotFoundError
from services.common.contracts.tensors import TensorSpec
from services.common.serving.model_api import ModelFile
from services.common.serving.model_lifecycle import ModelLifecycle, ModelLoadError, models_parameter, next_version


@dataclass
class FakeModel:
    name: str = "text_moderation"
    version: str = "1"
    platform: str = "fake"
    max_batch_size: int = 4
    inputs: Sequence[TensorSpec] = (TensorSpec("TEXT", "BYTES", (1,)),)
    outputs: Sequence[TensorSpec] = (TensorSpec("SCORE", "FP32", (1,)),)
    files: Sequence[ModelFile] = ()
    warmup_error: str = ""
    warmed: bool = False

    def infer(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {"SCORE": np.zeros((len(inputs["TEXT"]), 1), np.float32)}

    def warmup(self) -> None:
        if self.warmup_error:
            raise RuntimeError(self.warmup_error)
        self.warmed = True

    def model_files(self) -> Sequence[ModelFile]:
        return self.files


@dataclass
class FakeRunner:
    model: FakeModel
    events: list[str] = field(default_factory=list)

    async def close(self) -> None:
        self.events.append(f"closed {self.model.version}")


class Repository:
    """What the next load builds (or the error it raises)."""

    def __init__(self) -> None:
        self.next: FakeModel | Exception = FakeModel()
        self.events: list[str] = []

    def load(self, name: str) -> FakeModel:
        if isinstance(self.next, Exception):
            raise self.next
        return self.next

    def start(self, model: FakeModel) -> FakeRunner:
        self.events.append(f"started {model.version}")
        return FakeRunner(model, self.events)


def lifecycle(repository: Repository) -> tuple[ModelLifecycle[FakeRunner], dict[str, FakeRunner]]:
    runners = {"text_moderation": FakeRunner(FakeModel(), repository.events)}
    return ModelLifecycle(runners, load=repository.load, start=repository.start), runners  # type: ignore[arg-type]


async def test_load_warms_switches_then_drains_the_old_version() -> None:
    repository = Repository()
    models, runners = lifecycle(repository)
    new = FakeModel(files=(ModelFile("toxicity_en", "2", "/nonexistent"),))
    repository.next = new
    assert await models.load("text_moderation") == "2"
    assert runners["text_moderation"].model is new and new.warmed
    assert repository.events == ["started 2", "closed 1"]  # switch first, then drain and unload the old
    assert await models.load("text_moderation", "2026-12-01") == "2026-12-01"
    assert [(s.name, s.version, s.state) for s in models.index()] == [("text_moderation", "2026-12-01", "READY")]


@pytest.mark.parametrize("failure, message", [
    (RuntimeError("[ONNXRuntimeError] : 7 : INVALID_PROTOBUF : Load model from m.onnx failed"), "INVALID_PROTOBUF"),
    ("warmup", "warm-up produced NaN"),
])
async def test_failed_load_keeps_the_old_version(failure: Exception | str, message: str) -> None:
    repository = Repository()
    models, runners = lifecycle(repository)
    old = runners["text_moderation"]
    repository.next = FakeModel(warmup_error="warm-up produced NaN") if failure == "warmup" else failure  # type: ignore[assignment]
    with pytest.raises(ModelLoadError) as caught:
        await models.load("text_moderation")
    assert message in str(caught.value) and "(version 1 still serving)" in str(caught.value)
    assert runners["text_moderation"] is old and repository.events == []
    [state] = models.index()
    assert state.state == "READY" and state.version == "1" and message in state.reason


async def test_a_file_that_does_not_match_its_checksum_is_rejected(tmp_path: Path) -> None:
    repository = Repository()
    models, runners = lifecycle(repository)
    path = tmp_path / "model.onnx"
    path.write_bytes(b"tampered")
    repository.next = FakeModel(files=(ModelFile("toxicity_en", "2", str(path), hashlib.sha256(b"original").hexdigest()),))
    with pytest.raises(ModelLoadError, match="SHA-256 .* does not match the repository's"):
        await models.load("text_moderation")
    assert runners["text_moderation"].model.version == "1"


async def test_unload_and_unknown_models() -> None:
    repository = Repository()
    models, runners = lifecycle(repository)
    with pytest.raises(NotFoundError, match="unknown model 'ocr'"):
        await models.load("ocr")
    await models.unload("text_moderation")
    assert not runners and repository.events == ["closed 1"]
    assert [(s.state, s.reason) for s in models.index()] == [("UNAVAILABLE", "unloaded")]
    assert await models.load("text_moderation") == "2"


def test_versions_and_response_parameter() -> None:
    assert (next_version("1"), next_version("2026-12-01")) == ("2", "2026-12-01.1")
    model = FakeModel(files=(ModelFile("toxicity_en", "3", "p"),))
    assert models_parameter(model) == '[["text_moderation", "1"], ["toxicity_en", "3"]]'


@dataclass
class ContentVersioned(FakeModel):
    """A model whose version is a digest of its content (a tenant classifier)."""

    name: str = "classifier.acme"
    version: str = "c-9f2e"
    versioned_by_content: bool = True


async def test_open_names_load_a_model_the_service_did_not_start_with_at_its_own_version() -> None:
    repository = Repository()
    runners = {"text_moderation": FakeRunner(FakeModel(), repository.events)}
    models = ModelLifecycle(runners, load=repository.load, start=repository.start, open_names=True)  # type: ignore[arg-type]
    repository.next = ContentVersioned()
    assert await models.load("classifier.acme") == "c-9f2e"  # not "1": the classifier's own version
    assert [(m.name, m.version, m.state) for m in models.index()] == [("classifier.acme", "c-9f2e", "READY"),
                                                                      ("text_moderation", "1", "READY")]
    repository.next = ContentVersioned(version="c-1b7d")  # retrained: a reload serves the new digest
    assert await models.load("classifier.acme") == "c-1b7d" and repository.events[-1] == "closed c-9f2e"
    await models.unload("classifier.acme")
    assert "classifier.acme" not in runners


async def test_open_names_answer_not_found_for_a_name_nothing_builds_and_record_nothing() -> None:
    repository = Repository()
    runners = {"text_moderation": FakeRunner(FakeModel(), repository.events)}
    models = ModelLifecycle(runners, load=repository.load, start=repository.start, open_names=True)  # type: ignore[arg-type]
    repository.next = NotFoundError("model 'classifier.nobody': no classifier for tenant 'nobody'")
    with pytest.raises(NotFoundError, match="nobody"):
        await models.load("classifier.nobody")
    assert [m.name for m in models.index()] == ["text_moderation"]


async def test_closed_names_still_refuse_a_name_outside_the_start_set() -> None:
    models, _ = lifecycle(Repository())
    with pytest.raises(NotFoundError, match="unknown model"):
        await models.load("classifier.acme")


@dataclass
class SizedModel(FakeModel):
    """A model that counts against the memory budget (as a tenant classifier does)."""

    size: int = 0
    versioned_by_content: bool = True

    def memory_bytes(self) -> int:
        return self.size


class Classifiers:
    """Builds `classifier.<n>` models of `size` bytes each, counting builds."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.built: list[str] = []
        self.events: list[str] = []

    def load(self, name: str) -> SizedModel:
        self.built.append(name)
        return SizedModel(name=name, version="v1", size=self.size)

    def start(self, model: FakeModel) -> FakeRunner:
        return FakeRunner(model, self.events)


def budgeted(budget: int, now: list[float]) -> tuple[ModelLifecycle[FakeRunner], dict[str, FakeRunner], Classifiers]:
    classifiers = Classifiers(size=40)
    runners = {"text_moderation": FakeRunner(FakeModel(), classifiers.events)}  # shipped: never counted nor evicted
    models = ModelLifecycle(runners, load=classifiers.load, start=classifiers.start, open_names=True,  # type: ignore[arg-type]
                            budget_bytes=budget, clock=lambda: now[0])
    return models, runners, classifiers


async def test_past_the_budget_the_least_recently_used_is_evicted_and_comes_back_on_its_next_request() -> None:
    now = [0.0]
    models, runners, classifiers = budgeted(100, now)
    for index, name in enumerate(("classifier.a.v1", "classifier.b.v1")):
        now[0] = float(index)
        await models.load(name)
    now[0] = 5.0
    models.touch("classifier.a.v1")  # a was used after b was loaded: b is now the least recently used
    now[0] = 6.0
    await models.load("classifier.c.v1")  # 120 bytes > 100: b goes
    assert sorted(runners) == ["classifier.a.v1", "classifier.c.v1", "text_moderation"]
    assert models.evicted("classifier.b.v1") and models.evictions == 1 and models.held_bytes() == 80
    assert "closed v1" in classifiers.events  # its runner drained and stopped
    state = {s.name: s for s in models.index()}["classifier.b.v1"]
    assert state.state == "UNAVAILABLE" and state.reason.startswith("evicted: over the memory budget of 100 bytes")
    # a request for b loads it again (once, however many wait), and evicts the least recently used of the others
    now[0] = 7.0
    await asyncio.gather(*(models.reload_evicted("classifier.b.v1") for _ in range(5)))
    assert classifiers.built.count("classifier.b.v1") == 2
    assert sorted(runners) == ["classifier.b.v1", "classifier.c.v1", "text_moderation"] and models.evicted("classifier.a.v1")
    await models.reload_evicted("classifier.b.v1")  # loaded: nothing to do
    assert classifiers.built.count("classifier.b.v1") == 2


async def test_a_model_alone_over_the_budget_still_serves_and_an_unload_is_not_undone() -> None:
    now = [0.0]
    models, runners, _ = budgeted(10, now)
    await models.load("classifier.a.v1")
    assert "classifier.a.v1" in runners and not models.evicted("classifier.a.v1")
    await models.load("classifier.b.v1")
    assert models.evicted("classifier.a.v1") and "classifier.b.v1" in runners
    await models.unload("classifier.a.v1")  # an operator's unload: no request loads it again
    assert not models.evicted("classifier.a.v1")


def test_at_start_the_models_past_the_budget_are_set_aside_before_they_run() -> None:
    runners = {name: FakeRunner(SizedModel(name=name, size=40)) for name in ("classifier.a.v1", "classifier.b.v1",
                                                                          "classifier.c.v1")}
    runners["text_moderation"] = FakeRunner(FakeModel())
    models = ModelLifecycle(runners, load=Classifiers(40).load, start=Classifiers(40).start, open_names=True,  # type: ignore[arg-type]
                            budget_bytes=90)
    assert models.trim_unstarted() == ["classifier.c.v1"]
    assert sorted(runners) == ["classifier.a.v1", "classifier.b.v1", "text_moderation"] and models.evicted("classifier.c.v1")
    unlimited = ModelLifecycle(dict(runners), load=Classifiers(40).load, start=Classifiers(40).start)  # type: ignore[arg-type]
    assert unlimited.trim_unstarted() == []
