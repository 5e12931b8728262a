"""Known content through the real router (issue 42): a router process with a `match` upstream (a real match
service on loopback, banks in its store) answers a re-posted (brightened) banked photo BLOCK with match evidence, the
exact banked bytes BLOCK at once (short-circuited), and a light edit of a banked spam message takes the
action the policy gives that bank, under a policy version that turns matching on; the version before it
ignores the banks. A tenant's bank made through the admin API (BankAdmin) matches that tenant's messages
within the match service's reload interval, and so does an image a reviewer labelled (SubmitLabels)."""

from __future__ import annotations

import asyncio
import hashlib
import io
import shutil
from pathlib import Path

import grpc
import pytest
import yaml
from PIL import Image
from auditmesh.v1 import admin_pb2 as apb
from auditmesh.v1 import admin_pb2_grpc as apb_grpc
from auditmesh.v1 import moderation_pb2 as pb
from auditmesh.v1 import moderation_pb2_grpc as pb_grpc

from bench.match_mesh import closed_loop
from bench.render import render_photo_like
from services.common.serving.modality_config import load_service_config
from services.common.serving.modality_main import build_service
from services.common.service_config import ServerConfig
from services.launcher import ROOT, Mesh, free_base_port
from services.match.banks import BankSpec, BankStore, Entry
from services.match.server import served_models
from services.match.signals import image_signals, pdq_hex, text_signals
from services.router.control.image_labels import reviewed_bank_name
from tests.unit.match.conftest import photo_bytes, rgb, variants

pytestmark = pytest.mark.slow

ADMIN = [("x-admin-key", "demo-admin-key")]
SCAM = "Your parcel is held at customs today, pay the 2.99 release fee at parcel-release-desk to get it delivered"
SPAM = "Earn $500 a day from home, no experience needed. DM me on telegram @richfast99 and I will show you how"


def moderate(stub: pb_grpc.ModerationServiceStub, item_id: str, *, text: str = "", image: bytes = b"") -> pb.ModerateResponse:
    part = pb.Part(text=text) if text else pb.Part(image=pb.Image(data=image))
    response: pb.ModerateResponse = stub.Moderate(pb.ModerateRequest(item=pb.Item(id=item_id, parts=[part])),
                                                  metadata=[("x-api-key", "demo-acme-key")], timeout=30.0)
    return response


def gif_of(loop: int) -> bytes:
    """A three-frame GIF of unrelated photo-like frames (in no bank)."""
    frames = [Image.open(io.BytesIO(render_photo_like((160, 120), seed=seed))).convert("RGB") for seed in (11, 12, 13)]
    out = io.BytesIO()
    frames[0].save(out, "GIF", save_all=True, append_images=frames[1:], duration=200, loop=loop)
    return out.getvalue()


def matched(response: pb.ModerateResponse) -> list[tuple[str, str, str]]:
    return [(e.category, e.match.bank, e.match.signal_type) for e in response.evidence if e.HasField("match")]


async def test_the_router_blocks_banked_content_and_short_circuits_exact_copies(tmp_path: Path) -> None:
    photo = photo_bytes("coffee.png")
    store = BankStore(tmp_path / "banks.sqlite")
    store.put_bank(BankSpec("known_gore", shared=True, category="violence"))
    store.add("known_gore", [Entry("pdq", pdq_hex(image_signals(photo, rgb(photo)).pdq[0]), "case-1"),
                             Entry("sha256", image_signals(photo, rgb(photo)).sha256, "case-1")])
    store.put_bank(BankSpec("spam_waves", shared=True, category="spam", action="review"))
    store.add("spam_waves", [Entry("text_simhash", text_signals(SPAM).simhash.hex(), "wave-7")])

    config = tmp_path / "config"
    shutil.copytree(ROOT / "config", config)
    match_config = load_service_config(config / "match.yaml")
    from dataclasses import replace

    match_config = replace(match_config, server=ServerConfig("127.0.0.1:0", grace_period_s=1.0),
                           match=replace(match_config.match, banks_path=str(tmp_path / "banks.sqlite"),
                                         reload_interval_s=0.3))
    models = served_models(match_config)
    service, _ = build_service(match_config, models)
    port = await service.start()
    # The shipped router.yaml names a match upstream; the router calls this test's service instead.
    # The router's BankAdmin writes the store this service reads (AUDITMESH_BANKS_PATH, as docker-compose sets it).
    mesh = Mesh(base_port=free_base_port(), config_dir=config, extra_env={"AUDITMESH_MATCH_URL": f"127.0.0.1:{port}",
                                                                          "AUDITMESH_BANKS_PATH": str(tmp_path / "banks.sqlite")})
    router = mesh.routers[0]
    try:
        await asyncio.to_thread(mesh.start_services, ["text", "vision", router], 180.0)
        with grpc.insecure_channel(mesh.address(router)) as public, grpc.insecure_channel(mesh.admin_address) as channel:
            stub, admin = pb_grpc.ModerationServiceStub(public), apb_grpc.PolicyAdminStub(channel)
            repost = variants(photo)["brighter"]  # PDQ 12 bits away: a near match, not an exact one
            before = await asyncio.to_thread(moderate, stub, "before", image=repost)
            assert matched(before) == []  # the shipped policy does not match known content
            document = yaml.safe_load((config / "policies" / "default.yaml").read_text(encoding="utf-8"))
            document.update(version="with-matches", ocr={"enabled": False},
                            matches={"short_circuit": True, "banks": {"spam_waves": "block"}})  # the bank says review
            admin.PutVersion(apb.PutVersionRequest(kind=apb.POLICY, name="default", content=yaml.safe_dump(document),
                                                   activate=True), metadata=ADMIN)

            reposted = await asyncio.to_thread(moderate, stub, "repost", image=repost)
            assert reposted.policy_version == "with-matches" and reposted.decision == pb.BLOCK
            assert matched(reposted) == [("violence", "known_gore", "pdq")] and not reposted.short_circuited
            assert ("banks", "g4") in {(m.name, m.version) for m in reposted.models}

            exact = await asyncio.to_thread(moderate, stub, "exact", image=photo)
            assert exact.decision == pb.BLOCK and exact.short_circuited
            assert matched(exact) == [("violence", "known_gore", "sha256")]
            # bench.match_mesh's closed loop counts what it is answered (here: every repeat blocked short-circuited)
            async with grpc.aio.insecure_channel(mesh.address(router)) as aio_public:
                loop = await closed_loop(pb_grpc.ModerationServiceStub(aio_public), photo, 0.5, 2, "bench",
                                         key=[("x-api-key", "demo-acme-key")])
            assert loop["items"] == loop["block"] == loop["short_circuited"] > 0 and loop["errors"] == 0

            # An animation's file banked by its SHA-256: matched as the file, besides its frames as stills. A copy
            # whose frames are the same but whose file differs (it loops once) matches nothing (that the verdict
            # cache keys on the file too: tests/unit/router/test_cached_pipeline.py).
            banked, looping_once = gif_of(loop=0), gif_of(loop=1)
            store.add("known_gore", [Entry("sha256", hashlib.sha256(banked).hexdigest(), "case-9")])
            for attempt in range(60):
                animated = await asyncio.to_thread(moderate, stub, f"gif-{attempt}", image=banked)
                if matched(animated):
                    break
                await asyncio.sleep(0.1)
            assert animated.decision == pb.BLOCK and animated.short_circuited
            assert [(e.match.signal_type, e.match.content_id, e.part_index, e.frame_index) for e in animated.evidence
                    if e.HasField("match")] == [("sha256", "case-9", 0, 0)]
            other = await asyncio.to_thread(moderate, stub, "gif-other", image=looping_once)
            assert matched(other) == [] and other.decision == pb.ALLOW

            edited = SPAM.replace("$500", "$700").replace("telegram", "TELEGRAM 🚀")
            spam = await asyncio.to_thread(moderate, stub, "spam", text=edited)
            category = next(c for c in spam.categories if c.category == "spam")
            assert category.action == pb.BLOCK and category.rule == "match:spam_waves@2/text_simhash"
            assert matched(spam) == [("spam", "spam_waves", "text_simhash")]

            # A bank made through the admin API (BankAdmin, on the router's admin port) for this tenant: the match
            # service swaps it in within its reload interval (tenant isolation: tests/unit/match/test_matcher.py).
            banks = apb_grpc.BankAdminStub(channel)
            banks.CreateBank(apb.CreateBankRequest(name="acme-scams", settings=apb.BankSettings(
                owner="acme", category="spam", action="block")), metadata=ADMIN)
            added = banks.AddContent(apb.AddContentRequest(bank="acme-scams", contents=[apb.BankContent(
                text=SCAM, content_id="ticket-88")]), metadata=ADMIN)
            assert added.hashes == 2
            for attempt in range(60):
                fresh = await asyncio.to_thread(moderate, stub, f"scam-{attempt}", text=SCAM.replace("2.99", "3.49"))
                if matched(fresh):
                    break
                await asyncio.sleep(0.1)
            assert matched(fresh) == [("spam", "acme-scams", "text_simhash")]
            assert fresh.decision == pb.BLOCK

            # A reviewer's image label (SubmitLabels with the image) banks it for the tenant: a re-post is blocked.
            reviewed = photo_bytes("astronaut.png")
            labelled = admin.SubmitLabels(apb.SubmitLabelsRequest(tenant="acme", items=[apb.LabelledItem(
                item_id="upload-5", image=reviewed, labels={"violence": True}, reviewer="rev-1")]), metadata=ADMIN)
            assert labelled.banked == 3
            for attempt in range(60):
                reposted_upload = await asyncio.to_thread(moderate, stub, f"upload-{attempt}",
                                                          image=variants(reviewed)["resized_half"])
                if matched(reposted_upload):
                    break
                await asyncio.sleep(0.1)
            assert matched(reposted_upload) == [("violence", reviewed_bank_name("acme", "violence"), "pdq")]
            assert reposted_upload.decision == pb.BLOCK
    finally:
        await asyncio.to_thread(mesh.stop)
        await service.stop()
        for model in models:
            model.close()  # type: ignore[attr-defined]
