"""Banks and matching with real photos and texts: re-posts of a banked photo match, unrelated photos never
do, flat images do not match perceptually, negative banks suppress, a tenant never matches another's
private bank, a partly enabled bank matches a stable share, a bank change is a new version."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from services.match.banks import BankError, BankSpec, BankStore, Entry, LoadedBanks
from services.match.matcher import match_image, match_text
from services.match.signals import image_signals, pdq_hex, text_signals
from tests.unit.match.conftest import PHOTOS, encoded, rgb, variants
from tests.unit.match.test_signals import SPAM, light_edits

BANKED = ("chelsea.png", "coffee.png", "astronaut.png", "rocket.jpg")


def pdq_entry(data: bytes, content_id: str) -> Entry:
    return Entry("pdq", pdq_hex(image_signals(data, rgb(data)).pdq[0]), content_id)


@pytest.fixture
def store(tmp_path: Path) -> BankStore:
    return BankStore(tmp_path / "banks.sqlite")


def test_reposts_of_banked_photos_match_and_unrelated_photos_never_do(store: BankStore, photos: dict[str, bytes]) -> None:
    store.put_bank(BankSpec("known_gore", shared=True, category="violence", severity="high"))
    store.add("known_gore", [pdq_entry(photos[name], f"case-{name}") for name in BANKED])
    banks = LoadedBanks.load(store).visible_to("acme")
    for name in BANKED:
        for kind, repost in variants(photos[name]).items():
            found = match_image(banks, image_signals(repost, rgb(repost)))
            assert [(m.bank, m.signal_type, m.content_id) for m in found] == [("known_gore", "pdq", f"case-{name}")], (name, kind)
            assert found[0].distance <= 31 and found[0].bank_version == 2
    for name in PHOTOS:
        if name not in BANKED:
            assert match_image(banks, image_signals(photos[name], rgb(photos[name]))) == [], name


def test_exact_bytes_match_at_distance_0_and_flat_images_never_match_perceptually(store: BankStore) -> None:
    flat = encoded(Image.new("RGB", (200, 200), (40, 40, 40)))
    other_flat = encoded(Image.new("RGB", (300, 100), (200, 10, 10)))
    signals = image_signals(flat, rgb(flat))
    assert signals.quality < 50
    store.put_bank(BankSpec("flats", shared=True, category="spam", min_pdq_quality=50))
    store.add("flats", [Entry("pdq", pdq_hex(signals.pdq[0]), "flat"), Entry("md5", signals.md5, "flat-exact")])
    banks = LoadedBanks.load(store).banks
    assert [(m.signal_type, m.distance, m.content_id) for m in match_image(banks, signals)] == [("md5", 0, "flat-exact")]
    assert match_image(banks, image_signals(other_flat, rgb(other_flat))) == []


def test_a_negative_bank_suppresses_the_others(store: BankStore, photos: dict[str, bytes]) -> None:
    data = photos["coffee.png"]
    store.put_bank(BankSpec("spam_images", shared=True, category="spam"))
    store.put_bank(BankSpec("known_benign", shared=True, negative=True))
    store.add("spam_images", [pdq_entry(data, "s-1")])
    store.add("known_benign", [pdq_entry(data, "b-1")])
    found = match_image(LoadedBanks.load(store).banks, image_signals(data, rgb(data)))
    assert sorted((m.bank, m.negative, m.suppressed) for m in found) == [("known_benign", True, False),
                                                                        ("spam_images", False, True)]


def test_a_tenant_never_matches_another_tenants_private_bank(store: BankStore, photos: dict[str, bytes]) -> None:
    data = photos["astronaut.png"]
    store.put_bank(BankSpec("acme_only", owner="acme", category="sexual"))
    store.add("acme_only", [pdq_entry(data, "a-1")])
    loaded = LoadedBanks.load(store)
    signals = image_signals(data, rgb(data))
    assert [m.bank for m in match_image(loaded.visible_to("acme"), signals)] == ["acme_only"]
    assert match_image(loaded.visible_to("globex"), signals) == []


def test_spam_campaign_edits_match_the_banked_message_and_unrelated_texts_do_not(store: BankStore) -> None:
    store.put_bank(BankSpec("spam_campaigns", shared=True, category="spam", severity="medium", action="review"))
    store.add("spam_campaigns", [Entry("text_simhash", text_signals(s).simhash.hex(), f"campaign-{i}")
                                 for i, s in enumerate(SPAM)])
    banks = LoadedBanks.load(store).banks
    for i, spam in enumerate(SPAM):
        for edit in light_edits(spam):
            found = match_text(banks, text_signals(edit))
            assert [(m.bank, m.content_id) for m in found] == [("spam_campaigns", f"campaign-{i}")], edit
    for benign in ("see you at lunch tomorrow", "the match starts at eight, bring snacks",
                   "我们明天一起去看电影吧", "Can anyone recommend a good crypto tax accountant?"):
        assert match_text(banks, text_signals(benign)) == [], benign


def test_enabled_ratio_matches_a_stable_share_of_content(store: BankStore) -> None:
    store.put_bank(BankSpec("rollout", shared=True, category="spam", enabled_ratio=0.25))
    texts = [f"limited offer number {i} buy now" for i in range(400)]
    store.add("rollout", [Entry("text_sha256", text_signals(t).sha256, t) for t in texts])
    banks = LoadedBanks.load(store).banks
    matched = [bool(match_text(banks, text_signals(t))) for t in texts]
    assert 60 <= sum(matched) <= 140 and matched == [bool(match_text(banks, text_signals(t))) for t in texts]


def test_specs_and_entries_are_validated_and_changes_raise_versions(store: BankStore) -> None:
    with pytest.raises(BankError, match="owner"):
        BankSpec("both", owner="acme", shared=True, category="spam")
    with pytest.raises(BankError, match="category"):
        BankSpec("nothing", shared=True)
    with pytest.raises(BankError, match="pdq hash is 64"):
        Entry("pdq", "abc")
    with pytest.raises(BankError, match="does not exist"):
        store.add("missing", [Entry("md5", "0" * 32)])
    assert store.put_bank(BankSpec("b", shared=True, category="spam")) == 1
    generation = store.generation()
    assert store.add("b", [Entry("md5", "0" * 32, "x")]) == 2 and store.generation() == generation + 1
    assert store.remove("b", [Entry("md5", "0" * 32)]) == (1, 3) and store.entries("b") == []
    store.delete_bank("b")
    assert store.banks() == []


def test_an_index_answers_within_its_radius_nearest_first() -> None:
    from services.match.index import HammingIndex

    rng = np.random.default_rng(0)
    hashes = rng.integers(0, 256, size=(500, 32), dtype=np.uint8)
    flat = HammingIndex.build(hashes, [f"c{i}" for i in range(500)])
    mih = HammingIndex.build(hashes, [f"c{i}" for i in range(500)], mih_from=100)
    query = hashes[7].copy()
    query[0] ^= 0b1011  # 3 bits
    assert flat.kind == "flat" and mih.kind == "mih"
    assert flat.query(query, 31) == mih.query(query, 31) == [[("c7", 3)]]
    assert flat.query(query, 2) == [[]]


def test_texts_that_say_too_little_never_match_and_cannot_be_banked(store: BankStore) -> None:
    from services.match.commands import content_entries

    store.put_bank(BankSpec("links", shared=True, category="spam"))
    with pytest.raises(BankError, match="says too little"):
        content_entries(texts=[("https://scam.example/abc 👉", "")])
    store.add("links", [Entry("text_sha256", text_signals("https://x.io/1").sha256, "link-only")])  # by hand
    assert match_text(LoadedBanks.load(store).banks, text_signals("👉 https://other.site/zzz !!!")) == []


def test_create_refuses_an_existing_bank_and_a_huge_image_is_hashed_small(store: BankStore, photos: dict[str, bytes]) -> None:
    from services.match.commands import create_bank, delete_bank

    create_bank(store, BankSpec("acme_private", owner="acme", category="hate"))
    with pytest.raises(BankError, match="exists"):
        create_bank(store, BankSpec("acme_private", shared=True, category="hate"))  # would hand acme's hashes to all
    assert delete_bank(store, "acme_private") == {"bank": "acme_private", "deleted": True}
    big = Image.open(__import__("io").BytesIO(photos["coffee.png"])).convert("RGB").resize((3000, 2000))
    data = encoded(big, "JPEG", quality=90)
    small = encoded(big.resize((600, 400)), "JPEG", quality=90)
    distance = (int.from_bytes(image_signals(data, rgb(data)).pdq[0], "big")
                ^ int.from_bytes(image_signals(small, rgb(small)).pdq[0], "big")).bit_count()
    assert distance <= 31


def test_changes_apply_only_while_the_bank_has_the_owner_checked(store: BankStore) -> None:
    store.create_bank(BankSpec("x", owner="a", category="spam"))
    store.delete_bank("x")
    assert store.create_bank(BankSpec("x", owner="b", category="spam")) == 1  # re-made for another tenant meanwhile
    for change in (lambda: store.update_bank(BankSpec("x", owner="a", category="hate")),
                   lambda: store.add("x", [Entry("md5", "1" * 32)], owner="a"),
                   lambda: store.remove("x", [Entry("md5", "1" * 32)], owner="a"),
                   lambda: store.remove_content("x", ["c"], owner="a"),
                   lambda: store.delete_bank("x", owner="a")):
        with pytest.raises(BankError, match="does not exist"):
            change()
    assert store.bank("x") == (BankSpec("x", owner="b", category="spam"), 1)  # b's bank untouched
    with pytest.raises(BankError, match="does not exist"):
        store.update_bank(BankSpec("gone", owner="a", category="spam"))  # an update never re-creates a bank
    assert store.bank("gone") is None and store.add("x", [], owner="b") == 1  # nothing to add: no new version


def test_a_tenants_negative_bank_never_suppresses_a_shared_bank(store: BankStore) -> None:
    text = "FREE crypto airdrop, connect your wallet at the official claim page today"
    sha = text_signals(text).sha256
    store.put_bank(BankSpec("platform", shared=True, category="spam"))
    store.put_bank(BankSpec("acme-mine", owner="acme", category="spam"))
    store.put_bank(BankSpec("acme-benign", owner="acme", negative=True))
    for bank in ("platform", "acme-mine", "acme-benign"):
        store.add(bank, [Entry("text_sha256", sha)])
    found = {m.bank: m.suppressed for m in match_text(LoadedBanks.load(store).visible_to("acme"), text_signals(text))}
    assert found == {"platform": False, "acme-mine": True, "acme-benign": False}
    store.put_bank(BankSpec("platform-benign", shared=True, negative=True))
    store.add("platform-benign", [Entry("text_sha256", sha)])
    found = {m.bank: m.suppressed for m in match_text(LoadedBanks.load(store).visible_to("acme"), text_signals(text))}
    assert found["platform"] is True and found["acme-mine"] is True  # a shared negative bank suppresses every bank
    exact = [m for m in match_text(LoadedBanks.load(store).visible_to("acme"), text_signals(text)) if m.bank == "platform"]
    assert exact[0].content_id == sha  # no content id given: the hash names the entry (flood guard, evidence)
