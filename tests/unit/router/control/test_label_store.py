"""services/router/control/label_store.py on a real SQLite file: per-tenant isolation, replace by item id,
all-or-nothing calls with the first bad item named, the per-tenant bound, pages by item id."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from services.common.errors import InvalidRequestError, LimitExceededError
from services.router.control.label_store import Label, LabelStore


def label(item_id: str, text: str = "free airdrop, connect your wallet", **labels: int) -> Label:
    return Label(item_id, text, labels or {"custom.crypto_scam": 1}, "rev-1", 0.0)


@pytest.fixture
def store(tmp_path: Path) -> LabelStore:
    return LabelStore(tmp_path / "labels.sqlite", max_per_tenant=5, clock=lambda: 1000.0)


def test_a_tenant_reads_and_counts_only_its_own_labels(store: LabelStore) -> None:
    assert store.submit("acme", [label("m-1"), label("m-2", spam=0)]).added == 2
    assert store.submit("globex", [label("m-1", "gg wp", spam=0)]).tenant_total == 1
    acme, _ = store.page("acme")
    globex, _ = store.page("globex")
    assert [(l.item_id, l.text, dict(l.labels)) for l in globex] == [("m-1", "gg wp", {"spam": 0})]
    assert [l.item_id for l in acme] == ["m-1", "m-2"] and acme[0].text.startswith("free airdrop")
    assert (store.count("acme"), store.count("globex"), store.count("initech")) == (2, 1, 0)
    assert acme[0].labelled_at == 1000.0 and acme[0].reviewer == "rev-1"  # 0 = when stored


def test_a_later_label_of_an_item_replaces_the_earlier_one(store: LabelStore) -> None:
    store.submit("acme", [label("m-1")])
    done = store.submit("acme", [Label("m-1", "free airdrop, connect your wallet", {"custom.crypto_scam": 0}, "rev-2", 5.0),
                                 label("m-3")])
    assert (done.added, done.replaced, done.tenant_total) == (1, 1, 2)
    first = store.page("acme")[0][0]
    assert (dict(first.labels), first.reviewer, first.labelled_at) == ({"custom.crypto_scam": 0}, "rev-2", 5.0)


@pytest.mark.parametrize("bad, message", [
    (Label("", "t", {"spam": 1}), r"items\[1\].item_id"),
    (Label("m\n9", "t", {"spam": 1}), r"items\[1\].item_id"),
    (Label("m-9", "  ", {"spam": 1}), r"items\[1\].text: the item's text is required"),
    (Label("m-9", "x" * 20_001, {"spam": 1}), r"items\[1\].text: 20001 characters"),
    (Label("m-9", "t", {}), r"items\[1\].labels: 1-32 categories"),
    (Label("m-9", "t", {"gore": 1}), r"items\[1\].labels.gore: unknown category"),
    (Label("m-9", "t", {"spam": 2}), r"items\[1\].labels.spam: must be 1 or 0"),
])
def test_a_bad_item_refuses_the_whole_call_naming_it(store: LabelStore, bad: Label, message: str) -> None:
    with pytest.raises(InvalidRequestError, match=message):
        store.submit("acme", [label("m-1"), bad])
    assert store.count("acme") == 0


def test_the_per_tenant_bound_refuses_a_call_that_would_pass_it_and_stores_none_of_it(store: LabelStore) -> None:
    store.submit("acme", [label(f"m-{i}") for i in range(4)])
    with pytest.raises(LimitExceededError, match="holds 4 labelled items; 2 more would pass the limit of 5"):
        store.submit("acme", [label("m-8"), label("m-9")])
    assert store.count("acme") == 4
    assert store.submit("acme", [label("m-0", spam=1), label("m-9")]).tenant_total == 5  # a replace costs nothing
    assert store.submit("globex", [label(f"g-{i}") for i in range(5)]).tenant_total == 5  # each tenant its own bound


def test_pages_follow_item_ids_and_a_forged_token_is_refused(store: LabelStore) -> None:
    store.submit("acme", [label(f"m-{i}") for i in (3, 1, 4, 2)])
    first, token = store.page("acme", limit=3)
    rest, end = store.page("acme", limit=3, page_token=token)
    assert [l.item_id for l in first] == ["m-1", "m-2", "m-3"] and [l.item_id for l in rest] == ["m-4"] and end == ""
    with pytest.raises(InvalidRequestError, match="page_token"):
        store.page("acme", page_token="%%%")
    with pytest.raises(InvalidRequestError, match="limit"):
        store.page("acme", limit=0)


def test_the_file_is_private_and_survives_a_reopen(tmp_path: Path) -> None:
    path = tmp_path / "var" / "labels.sqlite"
    store = LabelStore(path)
    store.submit("acme", [label("m-1")])
    store.close()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert [l.item_id for l in LabelStore(path).page("acme")[0]] == ["m-1"]


@pytest.mark.parametrize("when", [float("nan"), float("inf"), -1.0, 5e9])
def test_a_labelled_at_that_is_not_a_time_is_refused(store: LabelStore, when: float) -> None:
    with pytest.raises(InvalidRequestError, match=r"items\[0\].labelled_at"):
        store.submit("acme", [Label("m-1", "t", {"spam": 1}, "rev", when)])


def test_a_page_of_long_texts_ends_at_the_byte_budget(store: LabelStore, monkeypatch: pytest.MonkeyPatch) -> None:
    import services.router.control.label_store as module

    monkeypatch.setattr(module, "MAX_PAGE_BYTES", 25)
    store.submit("acme", [label(f"m-{i}", "x" * 10) for i in range(4)])
    first, token = store.page("acme", limit=10)
    rest, end = store.page("acme", limit=10, page_token=token)
    assert [l.item_id for l in first] == ["m-0", "m-1"] and [l.item_id for l in rest] == ["m-2", "m-3"] and end == ""


def test_deleting_labels_erases_only_that_tenants_items(store: LabelStore) -> None:
    store.submit("acme", [label("m-1"), label("m-2"), label("m-3")])
    store.submit("globex", [label("m-1")])
    assert store.delete("acme", ["m-1", "m-3", "m-3", "never-labelled"]) == 2
    assert [l.item_id for l in store.page("acme")[0]] == ["m-2"] and store.count("globex") == 1
    assert store.submit("acme", [label("m-4"), label("m-5"), label("m-6"), label("m-7")]).tenant_total == 5  # room again
    with pytest.raises(InvalidRequestError, match="item_ids: name at least one item"):
        store.delete("acme", [])
    with pytest.raises(InvalidRequestError, match="item_ids: at most 1000 per call, got 1001"):
        store.delete("acme", [f"m-{i}" for i in range(1001)])
