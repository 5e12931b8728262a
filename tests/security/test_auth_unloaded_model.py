"""Issue 12 item 4 (second half): after an (anonymous) RepositoryModelUnload of the vision model, image
answers became ALLOW (degraded, fail-open) with nothing to tell it apart from an outage. An unloaded
model is now its own degradation ("not loaded", metric reason model_unloaded) and, by default
(`failure.model_unloaded: closed`), REVIEW whatever the stage's own failure mode."""

from __future__ import annotations

import time

import pytest

from services.common.internal_auth import InternalCredentials, SharedSecret
from services.common.service_config import ServerConfig
from services.common.serving.modality_config import ModalityServiceConfig
from services.common.serving.modality_main import build_service
from services.router.config import Upstream
from services.router.dispatch import ModalityDispatcher, ModelUnloadedError
from services.router.fusion import ImageFinding, Signals, StageFailure, fuse
from services.router.metrics import reason_kind
from services.launcher import ROOT
from services.router.policy import FailureModes, PolicyDocument, Thresholds, compile_policy
from services.router.scheduler import Requester
from services.router.upstream_client import UpstreamSecurity
from tests.stubs import GatedModel, policy_from_file

SECRET = "service-secret-0123456789"


def policy(**failure: str) -> PolicyDocument:
    return PolicyDocument(name="p", version="1", categories={"sexual": Thresholds(review=0.5, block=0.9)},
                          failure=FailureModes(**failure))  # type: ignore[arg-type]


def test_an_unloaded_vision_model_is_review_not_a_silent_allow() -> None:
    failure = StageFailure("vision", "vision service: model 'image_safety' not loaded (NOT_FOUND)", unloaded=True)
    verdict = fuse(compile_policy(policy(vision="open")), Signals(failures=[failure]))
    assert verdict.decision == "review"
    assert [(d.stage, d.handling) for d in verdict.degradations] == [("vision", "fail_closed")]
    assert reason_kind(verdict.degradations[0].reason) == "model_unloaded"


def test_the_policy_may_say_an_unloaded_model_follows_the_stage_mode() -> None:
    failure = StageFailure("vision", "vision service: model 'image_safety' not loaded (NOT_FOUND)", unloaded=True)
    verdict = fuse(compile_policy(policy(vision="open", model_unloaded="stage")),
                   Signals(images=[ImageFinding(0, "m", {"sexual": 0.0})], failures=[failure]))
    assert verdict.decision == "allow" and verdict.degradations[0].handling == "fail_open"
    # An outage (not an unloaded model) keeps the stage's own mode.
    outage = fuse(compile_policy(policy(vision="open")), Signals(failures=[StageFailure("vision", "UNAVAILABLE")]))
    assert outage.decision == "allow"


def test_the_shipped_policies_say_what_an_unloaded_model_means() -> None:
    for name in ("default", "strict"):
        path = ROOT / "config" / "policies" / f"{name}.yaml"
        assert "model_unloaded: closed" in path.read_text()  # said in the file, with its comment
        assert policy_from_file(path).document.failure.model_unloaded == "closed"


async def test_the_dispatcher_reports_an_unloaded_model_as_such() -> None:
    config = ModalityServiceConfig("vision", ServerConfig("127.0.0.1:0", grace_period_s=0.5))
    service, servicer = build_service(config, [GatedModel()], factory=lambda _: [GatedModel()],
                                      credentials=InternalCredentials(SharedSecret(SECRET), None))
    port = await service.start()
    dispatcher = ModalityDispatcher("vision", Upstream(f"127.0.0.1:{port}", "gated"), input_name="TEXT",
                                    output_names=("LENGTH",), security=UpstreamSecurity(secret=SECRET))
    dispatcher.start()
    try:
        rows = await dispatcher.submit(Requester("t"), [b"hello"], time.monotonic() + 5.0)
        assert float(rows[0]["LENGTH"][0]) == 5.0
        assert servicer.lifecycle is not None
        await servicer.lifecycle.unload("gated")
        with pytest.raises(ModelUnloadedError, match="not loaded"):
            await dispatcher.submit(Requester("t"), [b"hello"], time.monotonic() + 5.0)
    finally:
        await dispatcher.close()
        await service.stop()
