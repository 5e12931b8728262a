"""Issue 12 item 1: a ModerateBatch of six valid ~10 MB PNGs came back six times ALLOW (degraded,
fail-open) with vision and OCR never run, because the router sent them to the vision and OCR services
as one ModelInfer over those services' message limit; a small image in the same batch lost its image
stages too. Batches are now cut by bytes, so every image is moderated."""

from __future__ import annotations

import grpc
from auditmesh.v1 import moderation_pb2 as pb
from auditmesh.v1 import moderation_pb2_grpc as pb_grpc

from tests.security.inputs import KEY, auth, padded_png
from tests.stubs import item

#: Just under the router's limits.max_image_bytes (10 MiB).
BIG = 10_400_000


def test_six_ten_megabyte_images_and_a_small_one_are_all_moderated(stub: pb_grpc.ModerationServiceStub) -> None:
    bigs = [item(padded_png([f"harmless caption {i}"], BIG), item_id=f"big-{i}") for i in range(6)]
    small = item(padded_png(["Daily deals 2026", "你这个傻逼"], 40_000), item_id="small")
    request = pb.ModerateBatchRequest(items=[*bigs, small])
    assert request.ByteSize() > 60_000_000
    results = stub.ModerateBatch(request, metadata=auth(KEY), timeout=120).results
    assert [r.item_id for r in results] == [f"big-{i}" for i in range(6)] + ["small"]
    for result in results:
        assert not result.HasField("error"), result.error
        assert not result.degraded, (result.item_id, list(result.degradations))
        stages = {t.stage for t in result.timings}
        assert {"vision", "ocr"} <= stages, (result.item_id, stages)
        assert any(e.HasField("image_score") for e in result.evidence), result.item_id
    assert results[-1].decision == pb.BLOCK, results[-1]  # its OCR text was read and judged
