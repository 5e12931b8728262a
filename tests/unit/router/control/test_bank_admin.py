"""The BankAdmin service over a real in-process gRPC server and a real bank store: banks created, changed,
listed, filled with images, texts and hash lists, exported and emptied; admin-key scopes keep tenants'
banks apart; every bad request names its field; what it writes is what the match service loads."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import AsyncIterator

import grpc
import numpy as np
import pytest
from auditmesh.v1 import admin_pb2 as apb
from auditmesh.v1 import admin_pb2_grpc as apb_grpc
from PIL import Image

from services.match.banks import BankStore, LoadedBanks
from services.match.matcher import match_image, match_text
from services.match.signals import image_signals, text_signals
from services.router.control.admin_auth import AdminAuth, AdminKey
from services.router.control.bank_admin import BankAdminServicer
from services.router.control.hashed_images import MAX_IMAGES
from services.router.tenants import hash_key
from tests.stubs import admin_key, status_of

ROOT, SCOPED = admin_key("root-admin-key"), admin_key("a-only-admin-key")
PDQ = "f8f8f0cee0f4a84f06370a32038f67f0b36e2ed596623e1d33e6339c4e9c9b22"
SPAM = "FREE crypto airdrop today only, connect your wallet at the link"


def photo(seed: int = 3, quality: int = 95) -> bytes:
    """A textured JPEG (random blocks, so its PDQ quality is high)."""
    blocks = np.random.default_rng(seed).integers(0, 255, (16, 16, 3), dtype=np.uint8)
    image = Image.fromarray(blocks).resize((256, 256), Image.Resampling.BILINEAR)
    out = io.BytesIO()
    image.save(out, "JPEG", quality=quality)
    return out.getvalue()


@contextlib.asynccontextmanager
async def serving(store: BankStore | None) -> AsyncIterator[apb_grpc.BankAdminStub]:
    keys = [AdminKey("root", hash_key("root-admin-key")), AdminKey("a-team", hash_key("a-only-admin-key"), ("a",))]
    server = grpc.aio.server()
    apb_grpc.add_BankAdminServicer_to_server(BankAdminServicer(store, AdminAuth(keys)), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            yield apb_grpc.BankAdminStub(channel)
    finally:
        await server.stop(None)


@pytest.fixture
def store(tmp_path: Path) -> BankStore:
    return BankStore(tmp_path / "banks.sqlite")


@pytest.fixture
async def stub(store: BankStore) -> AsyncIterator[apb_grpc.BankAdminStub]:
    async with serving(store) as client:
        yield client


async def test_a_bank_made_through_the_api_is_what_the_match_service_loads(stub: apb_grpc.BankAdminStub,
                                                                           store: BankStore) -> None:
    created = await stub.CreateBank(apb.CreateBankRequest(name="a-gore", settings=apb.BankSettings(
        owner="a", category="violence", action="review", pdq_distance=20)), metadata=SCOPED)
    assert (created.name, created.version, created.settings.severity, created.settings.pdq_distance,
            created.settings.text_distance) == ("a-gore", 1, "high", 20, 56)
    added = await stub.AddContent(apb.AddContentRequest(bank="a-gore", contents=[
        apb.BankContent(image=photo(), content_id="case-1"),
        apb.BankContent(text=SPAM),
        apb.BankContent(hash=apb.BankHash(signal_type="pdq", value=PDQ.upper()), content_id="partner-9")]),
        metadata=SCOPED)
    assert (added.hashes, added.version) == (6, 2)  # image: pdq, md5, sha256; text: simhash, sha256; one pdq
    banks = LoadedBanks.load(store).banks
    repost = photo(quality=60)
    assert [(m.bank, m.content_id, m.action) for m in match_image(banks, image_signals(repost, _rgb(repost)))] == [
        ("a-gore", "case-1", "review")]
    assert [m.content_id for m in match_text(banks, text_signals("free crypto AIRDROP today only!! connect your wallet "
                                                                   "at the link 🚀"))] == [SPAM[:60]]
    info = (await stub.ListBanks(apb.ListBanksRequest(), metadata=SCOPED)).banks[0]
    assert dict(info.hashes) == {"pdq": 2, "md5": 1, "sha256": 1, "text_simhash": 1, "text_sha256": 1}
    updated = await stub.UpdateBank(apb.UpdateBankRequest(name="a-gore", settings=apb.BankSettings(
        enabled_ratio=0.25, action="block")), metadata=SCOPED)
    assert (updated.version, updated.settings.enabled_ratio, updated.settings.action, updated.settings.pdq_distance,
            updated.settings.category) == (3, 0.25, "block", 20, "violence")
    removed = await stub.RemoveContent(apb.RemoveContentRequest(bank="a-gore", content_ids=["case-1"], contents=[
        apb.BankContent(text=SPAM)]), metadata=SCOPED)
    assert (removed.hashes, removed.version) == (5, 5)
    exported = await stub.ExportHashes(apb.ExportHashesRequest(bank="a-gore", format="threatexchange"), metadata=SCOPED)
    assert (exported.data.decode(), exported.hashes, exported.version) == (f"pdq {PDQ}\n", 1, 5)
    await stub.DeleteBank(apb.DeleteBankRequest(name="a-gore"), metadata=SCOPED)
    assert not (await stub.ListBanks(apb.ListBanksRequest(), metadata=ROOT)).banks
    assert LoadedBanks.load(store).banks == ()


async def test_hash_lists_import_in_every_format_and_a_bad_line_adds_nothing(stub: apb_grpc.BankAdminStub) -> None:
    await stub.CreateBank(apb.CreateBankRequest(name="waves", settings=apb.BankSettings(shared=True, category="spam")),
                          metadata=ROOT)
    te = f"pdq {PDQ}\nraw_text {SPAM}\n".encode()
    done = await stub.ImportHashes(apb.ImportHashesRequest(bank="waves", format="threatexchange", data=te), metadata=ROOT)
    assert (done.hashes, done.version) == (3, 2)
    hma = json.dumps([{"id": 7, "signals": {"photo_md5": "d41d8cd98f00b204e9800998ecf8427e"}}]).encode()
    assert (await stub.ImportHashes(apb.ImportHashesRequest(bank="waves", format="hma_json", data=hma),
                                    metadata=ROOT)).version == 3
    bad = f"pdq {PDQ.replace('f', '0')}\nvideo_md5 d41d8cd98f00b204e9800998ecf8427e\n".encode()
    assert await status_of(stub.ImportHashes(apb.ImportHashesRequest(bank="waves", format="threatexchange", data=bad),
                                             metadata=ROOT)) == (
        grpc.StatusCode.INVALID_ARGUMENT, "line 2: signal type 'video_md5' is not matched here: this mesh matches images "
        "(pdq, photo_md5, photo_sha256) and texts (raw_text)")
    exported = await stub.ExportHashes(apb.ExportHashesRequest(bank="waves", format="hma_json"), metadata=ROOT)
    assert exported.hashes == 4 and {"id": "7", "signals": {"md5": "d41d8cd98f00b204e9800998ecf8427e"}} in json.loads(
        exported.data)
    code, message = await status_of(stub.ImportHashes(apb.ImportHashesRequest(bank="waves", format="xml", data=b""),
                                                      metadata=ROOT))
    assert (code, message) == (grpc.StatusCode.INVALID_ARGUMENT, "format: one of csv, threatexchange, hma_json, got 'xml'")
    code, message = await status_of(stub.ImportHashes(apb.ImportHashesRequest(bank="waves", data=b"\xff\xfe"),
                                                      metadata=ROOT))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and message.startswith("data: not UTF-8")


async def test_scoped_keys_never_see_or_touch_other_tenants_or_shared_banks(stub: apb_grpc.BankAdminStub) -> None:
    for name, settings in (("b-private", apb.BankSettings(owner="b", category="hate")),
                           ("shared-spam", apb.BankSettings(shared=True, category="spam"))):
        await stub.CreateBank(apb.CreateBankRequest(name=name, settings=settings), metadata=ROOT)
    assert not (await stub.ListBanks(apb.ListBanksRequest(), metadata=SCOPED)).banks
    for name in ("b-private", "shared-spam", "no-such-bank"):
        code, message = await status_of(stub.AddContent(apb.AddContentRequest(bank=name, contents=[
            apb.BankContent(text=SPAM)]), metadata=SCOPED))
        assert (code, message) == (grpc.StatusCode.NOT_FOUND,
                                   f"bank {name!r} does not exist, or is not one admin key 'a-team' manages")
        assert (await status_of(stub.ExportHashes(apb.ExportHashesRequest(bank=name), metadata=SCOPED)))[0] == \
            grpc.StatusCode.NOT_FOUND
        assert (await status_of(stub.DeleteBank(apb.DeleteBankRequest(name=name), metadata=SCOPED)))[0] == \
            grpc.StatusCode.NOT_FOUND
    for settings in (apb.BankSettings(owner="b", category="hate"), apb.BankSettings(shared=True, category="hate")):
        code, _ = await status_of(stub.CreateBank(apb.CreateBankRequest(name="mine", settings=settings), metadata=SCOPED))
        assert code == grpc.StatusCode.PERMISSION_DENIED
    await stub.CreateBank(apb.CreateBankRequest(name="a-own", settings=apb.BankSettings(owner="a", category="hate")),
                          metadata=SCOPED)
    assert await status_of(stub.UpdateBank(apb.UpdateBankRequest(name="a-own", settings=apb.BankSettings(owner="b")),
                                           metadata=SCOPED)) == (
        grpc.StatusCode.INVALID_ARGUMENT, "settings.owner: a bank's owner cannot change (its hashes would reach another "
        "tenant's content): delete it and create it again")
    assert (await status_of(stub.ListBanks(apb.ListBanksRequest())))[0] == grpc.StatusCode.UNAUTHENTICATED
    assert [b.name for b in (await stub.ListBanks(apb.ListBanksRequest(), metadata=ROOT)).banks] == [
        "a-own", "b-private", "shared-spam"]


@pytest.mark.parametrize(("request_", "status", "message"), [
    (apb.CreateBankRequest(name="Bad Name", settings=apb.BankSettings(shared=True, category="spam")),
     grpc.StatusCode.INVALID_ARGUMENT, "name: 1-64 lower-case letters, digits, '_' or '-', got 'Bad Name'"),
    (apb.CreateBankRequest(name="x", settings=apb.BankSettings(shared=True, category="spam", action="delete")),
     grpc.StatusCode.INVALID_ARGUMENT, "action: review or block, got 'delete'"),
    (apb.CreateBankRequest(name="x", settings=apb.BankSettings(shared=True)),
     grpc.StatusCode.INVALID_ARGUMENT, "category: a taxonomy category or custom.<name> is required (what a match means), "
     "got ''"),
    (apb.CreateBankRequest(name="x", settings=apb.BankSettings(owner="a", shared=True, category="spam")),
     grpc.StatusCode.INVALID_ARGUMENT, "owner: a bank has an owner tenant, or is shared (shared: true, no owner); not "
     "both, not neither"),
    (apb.CreateBankRequest(name="x", settings=apb.BankSettings(shared=True, category="spam", enabled_ratio=1.5)),
     grpc.StatusCode.INVALID_ARGUMENT, "enabled_ratio: 0..1, got 1.5"),
    (apb.CreateBankRequest(name="reviewed-abc", settings=apb.BankSettings(owner="a", category="spam")),
     grpc.StatusCode.INVALID_ARGUMENT, "name: names starting with 'reviewed-' are kept for the banks reviewers' image "
     "labels fill (SubmitLabels), got 'reviewed-abc'"),
])
async def test_bad_settings_name_the_field(stub: apb_grpc.BankAdminStub, request_: apb.CreateBankRequest,
                                           status: grpc.StatusCode, message: str) -> None:
    assert await status_of(stub.CreateBank(request_, metadata=ROOT)) == (status, message)


async def test_bad_contents_name_their_index_and_nothing_is_added(stub: apb_grpc.BankAdminStub) -> None:
    await stub.CreateBank(apb.CreateBankRequest(name="k", settings=apb.BankSettings(shared=True, category="spam")),
                          metadata=ROOT)
    cases = [
        ([apb.BankContent(text=SPAM), apb.BankContent(image=b"not an image")], "contents[1].image: "),
        ([apb.BankContent(text="dm me")], "contents[0].text: text 'dm me': its canonical form 'dm me' says too little"),
        ([apb.BankContent(hash=apb.BankHash(signal_type="sha1", value="00"))], "contents[0].hash: signal: one of pdq, md5"),
        ([apb.BankContent(content_id="empty")], "contents[0].content: set one of image, text or hash"),
    ]
    for contents, start in cases:
        code, message = await status_of(stub.AddContent(apb.AddContentRequest(bank="k", contents=contents), metadata=ROOT))
        assert code == grpc.StatusCode.INVALID_ARGUMENT and message.startswith(start), message
    images = [apb.BankContent(image=b"x") for _ in range(MAX_IMAGES + 1)]
    code, _ = await status_of(stub.AddContent(apb.AddContentRequest(bank="k", contents=images), metadata=ROOT))
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert (await status_of(stub.CreateBank(apb.CreateBankRequest(name="k", settings=apb.BankSettings(
        shared=True, category="spam")), metadata=ROOT)))[0] == grpc.StatusCode.ALREADY_EXISTS
    info = (await stub.ListBanks(apb.ListBanksRequest(), metadata=ROOT)).banks[0]
    assert (info.version, dict(info.hashes)) == (1, {})


async def test_without_a_bank_store_every_call_says_so() -> None:
    async with serving(None) as client:
        code, message = await status_of(client.ListBanks(apb.ListBanksRequest(), metadata=ROOT))
    assert code == grpc.StatusCode.FAILED_PRECONDITION and "lifecycle.banks_path" in message


def _rgb(data: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))


async def test_scoped_names_oversized_images_and_exports_are_refused(stub: apb_grpc.BankAdminStub,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from services.router.control import bank_admin

    code, message = await status_of(stub.CreateBank(apb.CreateBankRequest(name="b-private", settings=apb.BankSettings(
        owner="a", category="hate")), metadata=SCOPED))
    assert (code, message) == (grpc.StatusCode.INVALID_ARGUMENT, "name: a bank made with a tenant-scoped key is named "
                               "'a-...' (bank names are one namespace shared by every tenant), got 'b-private'")
    await stub.CreateBank(apb.CreateBankRequest(name="a-x", settings=apb.BankSettings(owner="a", category="hate")),
                          metadata=SCOPED)
    huge = io.BytesIO()
    Image.new("RGB", (5000, 4000)).save(huge, "PNG")  # 20 megapixels in a few kilobytes
    code, message = await status_of(stub.AddContent(apb.AddContentRequest(bank="a-x", contents=[
        apb.BankContent(image=huge.getvalue())]), metadata=SCOPED))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and message.startswith("contents[0].image: ") and "pixels" in message
    await stub.AddContent(apb.AddContentRequest(bank="a-x", contents=[apb.BankContent(text=SPAM)]), metadata=SCOPED)
    monkeypatch.setattr(bank_admin, "MAX_EXPORT_HASHES", 1)
    code, message = await status_of(stub.ExportHashes(apb.ExportHashesRequest(bank="a-x"), metadata=SCOPED))
    assert code == grpc.StatusCode.FAILED_PRECONDITION and "holds 2 hashes" in message
