"""services/router/dispatch.py: a batch the upstream refuses for its content is retried item by
item, so only the item at fault fails, with its own status (never a stage failure, which the policy
could answer fail-open); stage failures name neither the upstream's address nor its message (issue
12 items 1 and 11). The upstream is a fake client (unit test)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import numpy as np
import pytest
from opentelemetry.trace import INVALID_SPAN_CONTEXT
from tritonclient.utils import InferenceServerException

from services.common.errors import InvalidRequestError, LimitExceededError
from services.common.serving.modality_config import ServingLimits
from services.router.config import Upstream
from services.router.dispatch import ModalityDispatcher, UpstreamError
from services.router.scheduler import Requester


class FakeResult:
    def __init__(self, rows: int) -> None:
        self.rows = rows

    def as_numpy(self, name: str) -> np.ndarray:
        return np.array([[b"ok"]] * self.rows, dtype=np.object_)

    def get_response(self) -> Any:
        class Response:
            parameters: dict[str, Any] = {}
            model_name, model_version = "m", "1"
        return Response()


class FakeClient:
    """Refuses any request holding a payload starting with b"bad" (as a service's own limit check
    would), or fails every request with `fail`."""

    def __init__(self, fail: tuple[str, str] | None = None) -> None:
        self.fail = fail
        self.calls: list[int] = []

    async def infer(self, model: str, inputs: list[Any], **_: Any) -> FakeResult:
        data = inputs[0]._raw_content  # tritonclient keeps the serialised BYTES tensor here
        self.calls.append(int(inputs[0].shape()[0]))
        if self.fail is not None:
            raise InferenceServerException(self.fail[1], status=f"StatusCode.{self.fail[0]}")
        if b"bad" in data:
            raise InferenceServerException("input 'TEXT' element 0 is 9 bytes; this service takes at most 8 per "
                                           "element (limits.max_row_bytes)", status="StatusCode.RESOURCE_EXHAUSTED")
        return FakeResult(int(inputs[0].shape()[0]))

    async def close(self) -> None:
        pass


def dispatcher(client: FakeClient) -> ModalityDispatcher:
    upstream = Upstream("10.1.2.3:8101", "m", limits=ServingLimits(max_request_bytes=1000, max_row_bytes=100))
    result = ModalityDispatcher("text", upstream, input_name="TEXT", output_names=("OUT",))
    result._clients = [client]  # type: ignore[list-item]
    return result


async def test_only_the_item_at_fault_fails_with_its_own_status() -> None:
    client = FakeClient()
    text = dispatcher(client)
    text.start()
    try:
        deadline = time.monotonic() + 5
        good, bad = await asyncio.gather(text.submit(Requester("a"), [b"fine"], deadline),
                                         text.submit(Requester("b"), [b"bad item"], deadline), return_exceptions=True)
    finally:
        await text.close()
    assert isinstance(good, list) and good[0]["OUT"][0] == b"ok"
    assert isinstance(bad, LimitExceededError) and "limits.max_row_bytes" in str(bad)


async def test_an_input_over_the_upstream_limit_is_refused_before_it_is_queued() -> None:
    text = dispatcher(FakeClient())
    with pytest.raises(LimitExceededError, match="over what the text service takes"):
        await text.submit(Requester("a"), [b"x" * 101], time.monotonic() + 5)


@pytest.mark.parametrize("code, expected", [("UNAVAILABLE", UpstreamError), ("INVALID_ARGUMENT", InvalidRequestError)])
async def test_a_failure_names_the_service_and_code_only(code: str, expected: type[Exception]) -> None:
    text = dispatcher(FakeClient(fail=(code, "ipv4:10.1.2.3:8101: connection refused; other item's secret")))
    text.start()
    try:
        with pytest.raises(expected) as raised:
            await text.submit(Requester("a"), [b"fine"], time.monotonic() + 5)
    finally:
        await text.close()
    if expected is UpstreamError:  # a stage failure: the same text for every item of the batch
        assert str(raised.value) == "text service unavailable (UNAVAILABLE)"
    else:  # the item's own refusal (a batch of one): its status, the service's reason about it
        assert str(raised.value).startswith("the text service refused this input:")


async def test_a_refused_batch_is_retried_item_by_item() -> None:
    from services.router.dispatch import _Payload
    from services.router.fair_queue import Job

    client = FakeClient()
    text = dispatcher(client)
    deadline = time.monotonic() + 5
    jobs = [Job(t, 1, 1.0, deadline, 0.0, _Payload(data, INVALID_SPAN_CONTEXT)) for t, data in [("a", b"fine"), ("b", b"bad"), ("c", b"ok")]]
    results = await text._run_batch(jobs)
    assert client.calls == [3, 1, 1, 1]
    assert isinstance(results[1], LimitExceededError)
    assert [r["OUT"][0] for r in (results[0], results[2]) if isinstance(r, dict)] == [b"ok", b"ok"]
