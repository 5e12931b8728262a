"""Issue 12 item 10: Item.metadata had no limit (a 100,000-entry map and a 5 MB value were accepted
and stored in the audit log verbatim)."""

from __future__ import annotations

import grpc
import pytest
from auditmesh.v1 import moderation_pb2 as pb
from auditmesh.v1 import moderation_pb2_grpc as pb_grpc

from tests.security.inputs import KEY, auth
from tests.stubs import item


def moderate_with(stub: pb_grpc.ModerationServiceStub, metadata: dict[str, str]) -> pb.ModerateResponse:
    message = item("good morning everyone")
    message.metadata.update(metadata)
    return stub.Moderate(pb.ModerateRequest(request_id="m", item=message), metadata=auth(KEY), timeout=30)


@pytest.mark.parametrize("metadata, limit", [
    ({f"k{i}": "v" for i in range(100_000)}, "max_metadata_entries"),
    ({"channel": "x" * 5_000_000}, "max_metadata_value_chars"),
    ({"k" * 10_000: "v"}, "max_metadata_key_chars"),
], ids=["entries", "value", "key"])
def test_oversized_metadata_is_resource_exhausted_naming_the_limit(stub: pb_grpc.ModerationServiceStub,
                                                                   metadata: dict[str, str], limit: str) -> None:
    with pytest.raises(grpc.RpcError) as raised:
        moderate_with(stub, metadata)
    assert raised.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, raised.value
    details = raised.value.details() or ""
    assert limit in details and "item.metadata" in details and len(details) < 400, details


def test_oversized_metadata_in_a_batch_is_that_items_error(stub: pb_grpc.ModerationServiceStub) -> None:
    bad = item("hello", item_id="bad")
    bad.metadata.update({f"k{i}": "v" for i in range(1000)})
    request = pb.ModerateBatchRequest(items=[item("hello there", item_id="good"), bad])
    results = stub.ModerateBatch(request, metadata=auth(KEY), timeout=30).results
    assert results[0].decision == pb.ALLOW and not results[0].HasField("error")
    assert results[1].error.code == grpc.StatusCode.RESOURCE_EXHAUSTED.value[0]
    assert "items[1].metadata" in results[1].error.message


def test_ordinary_metadata_is_accepted(stub: pb_grpc.ModerationServiceStub) -> None:
    response = moderate_with(stub, {"channel": "general", "author": "u-123"})
    assert response.decision == pb.ALLOW
