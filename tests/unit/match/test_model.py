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


@pytest.mark.parametrize("value, problem", [
    (b"no header line", "no header line"),
    (b'{"tenant": "acme"}\nhello', "the header is not"),
    (b'{"tenant": "acme", "kind": "video"}\nhello', "kind of 'text' or 'image'"),
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
    assert model.stale_s == 0.0
