"""The `match` model: envelopes in, matches out, per tenant; a bad envelope is INVALID_ARGUMENT material, an
undecodable image an ERROR of its own row; a bank change becomes visible after a reload, whole."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from services.common.contracts import match as contract
from services.common.errors import InvalidInputError
from services.match.banks import BankSpec, BankStore, Entry
from services.match.model import MatchModel
from services.match.settings import MatchSettings
from services.match.signals import image_signals, pdq_hex, text_signals
from tests.unit.match.conftest import rgb, variants

SPAM = "FREE crypto airdrop! Connect your wallet at https://claim-airdrop.xyz/r/8831 before midnight"


def batch(*items: tuple[str, contract.Kind, bytes]) -> dict[str, np.ndarray]:
    return {"ITEM": np.array([[contract.encode_item(*item)] for item in items], dtype=object)}


def rows(out: dict[str, np.ndarray]) -> list[tuple[list[contract.Match], str]]:
    return [contract.decode_row({name: out[name][i] for name in out}) for i in range(len(out["MATCHES"]))]


@pytest.fixture
def model(tmp_path: Path, photos: dict[str, bytes]) -> MatchModel:
    store = BankStore(tmp_path / "banks.sqlite")
    store.put_bank(BankSpec("acme_spam", owner="acme", category="spam", action="review"))
    store.add("acme_spam", [Entry("text_simhash", text_signals(SPAM).simhash.hex(), "wave-12")])
    store.put_bank(BankSpec("shared_gore", shared=True, category="violence"))
    data = photos["coffee.png"]
    store.add("shared_gore", [Entry("pdq", pdq_hex(image_signals(data, rgb(data)).pdq[0]), "g-1")])
    return MatchModel(store, MatchSettings(banks_path=str(tmp_path / "banks.sqlite")), watch=False)


def test_a_batch_is_matched_per_item_and_per_tenant(model: MatchModel, photos: dict[str, bytes]) -> None:
    edited = SPAM.replace("https://claim-airdrop.xyz/r/8831", "https://other.io/x").replace("FREE", "free 🚀")
    repost = variants(photos["coffee.png"])["jpeg_60"]
    out = rows(model.infer(batch(("acme", "text", edited.encode()), ("globex", "text", edited.encode()),
                                 ("globex", "image", repost), ("acme", "text", b"see you at lunch"),
                                 ("acme", "image", b"not an image"))))
    assert [(m.bank, m.content_id, m.action) for m in out[0][0]] == [("acme_spam", "wave-12", "review")]
    assert out[1] == ([], "")  # globex never matches acme's private bank
    assert [(m.bank, m.signal_type) for m in out[2][0]] == [("shared_gore", "pdq")] and out[2][1] == ""
    assert out[3] == ([], "")
    assert out[4][0] == [] and "could not be decoded" in out[4][1]


def test_a_file_is_matched_by_its_exact_hashes_only_and_never_decoded(model: MatchModel, photos: dict[str, bytes]) -> None:
    data = photos["coffee.png"]
    banked = b"GIF89a an animation's bytes, never decoded"
    model.store.add("shared_gore", [Entry("md5", image_signals(banked, rgb(data)).md5, "g-2")])
    model.reload_if_changed()
    out = rows(model.infer(batch(("globex", "file", banked), ("globex", "file", banked + b"!"),
                                 ("globex", "file", data))))  # the PNG's PDQ is banked; as a file it is not decoded
    assert [(m.bank, m.signal_type, m.distance, m.content_id) for m in out[0][0]] == [("shared_gore", "md5", 0, "g-2")]
    assert out[1] == ([], "") and out[2] == ([], "")
    assert model.work["file"][1] == 3


@pytest.mark.parametrize("value, problem", [
    (b"no header line", "no header line"),
    (b'{"tenant": "acme"}\nhello', "the header is not"),
    (b'{"tenant": "acme", "kind": "video"}\nhello', "kind of 'text', 'image' or 'file'"),
])
def test_a_malformed_envelope_is_refused_naming_the_row(model: MatchModel, value: bytes, problem: str) -> None:
    with pytest.raises(InvalidInputError, match=rf"ITEM\[1\]: ITEM: .*{problem}"):
        model.infer({"ITEM": np.array([[contract.encode_item("acme", "text", b"ok")], [value]], dtype=object)})


def test_a_bank_change_is_matched_after_the_reload_and_never_half_way(model: MatchModel) -> None:
    text = "limited offer: 90% off designer bags, only today at bagz.shop"
    assert rows(model.infer(batch(("acme", "text", text.encode()))))[0][0] == []
    model.store.add("acme_spam", [Entry("text_sha256", text_signals(text).sha256, "wave-13")])
    assert rows(model.infer(batch(("acme", "text", text.encode()))))[0][0] == []  # not reloaded yet
    assert model.reload_if_changed() and not model.reload_if_changed()
    found = rows(model.infer(batch(("acme", "text", text.encode()))))[0][0]
    assert [(m.signal_type, m.distance, m.content_id, m.bank_version) for m in found] == [("text_sha256", 0, "wave-13", 3)]
    assert model.stale_s < 1.0 and model.serving_problem() is None


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_banks_not_confirmed_current_for_max_stale_s_make_the_model_not_ready(tmp_path: Path) -> None:
    clock = FakeClock()
    store = BankStore(tmp_path / "banks.sqlite")
    model = MatchModel(store, MatchSettings(banks_path=str(tmp_path / "banks.sqlite"), reload_interval_s=5,
                                            max_stale_s=30), watch=False, clock=clock)
    clock.now += 29
    assert model.serving_problem() is None
    assert not model.reload_if_changed()  # the store read, the same generation: confirmed current
    clock.now += 29
    assert model.serving_problem() is None
    store.close()  # the store cannot be read any more: reloads fail, the set ages
    with pytest.raises(Exception):
        model.reload_if_changed()
    clock.now += 2
    problem = model.serving_problem()
    assert problem is not None and problem.startswith("banks not confirmed current for over max_stale_s (30 s)")
    with pytest.raises(ValueError, match="max_stale_s must be at least twice reload_interval_s"):
        MatchSettings(reload_interval_s=5, max_stale_s=9)


def test_a_flooding_entry_is_counted_reported_and_with_quarantine_suppressed(tmp_path: Path) -> None:
    from services.match.flood import FloodSettings
    from services.match.metrics import MatchCollector

    clock = FakeClock()
    store = BankStore(tmp_path / "banks.sqlite")
    store.put_bank(BankSpec("memes", shared=True, category="hate"))
    store.add("memes", [Entry("text_sha256", text_signals(SPAM).sha256, "template-1")])
    settings = MatchSettings(banks_path=str(tmp_path / "banks.sqlite"),
                             flood=FloodSettings(window_s=60, min_matches=5, factor=3, quarantine=True))
    model = MatchModel(store, settings, watch=False, clock=clock)
    suppressed = []
    for _ in range(7):
        found = rows(model.infer(batch(("acme", "text", SPAM.encode()))))[0][0]
        suppressed.append(found[0].suppressed)
    assert suppressed == [False] * 4 + [True] * 3  # the 5th match in the window floods: quarantined from then on
    assert model.flood_snapshot() == ["memes"]
    metrics = {(s.name, tuple(sorted(s.labels.items()))): s.value for family in MatchCollector(model).collect()
               for s in family.samples}
    assert metrics[("auditmesh_match_matches_total", (("bank", "memes"), ("signal", "text_sha256")))] == 7
    assert metrics[("auditmesh_match_floods_total", (("bank", "memes"),))] == 1
    assert metrics[("auditmesh_match_flooding_hashes", (("bank", "memes"),))] == 1
    assert metrics[("auditmesh_match_bank_hashes", (("bank", "memes"), ("signal", "text_sha256")))] == 1
    assert metrics[("auditmesh_match_items_total", (("kind", "text"),))] == 7
    clock.now += 61  # the window ended above the bar: still quarantined in the next one
    assert rows(model.infer(batch(("acme", "text", SPAM.encode()))))[0][0][0].suppressed is True
    assert model.flood_snapshot() == ["memes"]
    clock.now += 120  # a window without matches ends it
    assert rows(model.infer(batch(("acme", "text", SPAM.encode()))))[0][0][0].suppressed is False
    assert model.flood_snapshot() == []


def test_a_long_reload_of_a_readable_store_is_not_staleness(tmp_path: Path) -> None:
    clock = FakeClock()
    seen: list[str | None] = []

    class SlowStore(BankStore):
        def changes(self, held):  # type: ignore[no-untyped-def]
            clock.now += 70  # loading 10M hashes takes a while
            seen.append(slow.serving_problem())
            return super().changes(held)

    store = SlowStore(tmp_path / "banks.sqlite")
    slow = MatchModel(BankStore(tmp_path / "banks.sqlite"), MatchSettings(banks_path=str(tmp_path / "banks.sqlite"),
                                                                         max_stale_s=30), watch=False, clock=clock)
    slow.store = store
    store.put_bank(BankSpec("big", shared=True, category="spam"))
    assert slow.reload_if_changed()
    assert seen == [None] and slow.serving_problem() is None
