"""The bank store contract (`services.match.banks.BankRepository`), one check for every store: the SQLite file
(tests/unit/match/test_bank_store.py) and PostgreSQL (tests/integration/test_banks_postgres.py)."""

from __future__ import annotations

import pytest

from services.match.banks import BankExistsError, BankNotFoundError, BankRepository, BankSpec, Entry, LoadedBanks

MD5 = "0" * 31 + "1"
SHA = "ab" * 32
PDQ = "f0" * 32


def check_bank_store_contract(store: BankRepository) -> None:
    """Versions and the generation move with every change and only then; owners are checked with the change;
    the first report of a hash keeps its content id; a snapshot holds every bank with its hashes."""
    start = store.generation()
    assert store.create_bank(BankSpec("acme-scams", owner="acme", category="spam")) == 1
    with pytest.raises(BankExistsError, match="'acme-scams' exists"):
        store.create_bank(BankSpec("acme-scams", shared=True, category="spam"))
    assert store.put_bank(BankSpec("acme-scams", owner="acme", category="spam", action="review")) == 2
    assert store.put_bank(BankSpec("shared-gore", shared=True, category="violence")) == 1
    assert store.bank("acme-scams") == (BankSpec("acme-scams", owner="acme", category="spam", action="review"), 2)
    assert store.bank("nothing") is None

    assert store.add("acme-scams", [Entry("md5", MD5, "case-1"), Entry("sha256", SHA, "case-1"),
                                    Entry("pdq", PDQ, "case-2")], owner="acme") == 3
    assert store.add("acme-scams", [Entry("md5", MD5, "case-9")]) == 4  # already there: keeps case-1
    assert store.add("acme-scams", []) == 4
    assert store.counts("acme-scams") == {"md5": 1, "sha256": 1, "pdq": 1}
    assert store.entries("acme-scams") == [Entry("md5", MD5, "case-1"), Entry("pdq", PDQ, "case-2"),
                                           Entry("sha256", SHA, "case-1")]
    for wrong in (lambda: store.add("acme-scams", [Entry("md5", MD5)], owner="globex"),
                  lambda: store.update_bank(BankSpec("acme-scams", owner="globex", category="spam")),
                  lambda: store.delete_bank("acme-scams", owner="globex"),
                  lambda: store.remove_content("acme-scams", ["case-1"], owner="globex"),
                  lambda: store.add("nothing", [Entry("md5", MD5)])):
        with pytest.raises(BankNotFoundError):
            wrong()
    assert store.bank("acme-scams") == (BankSpec("acme-scams", owner="acme", category="spam", action="review"), 4)

    generation, banks = store.changes({})
    assert generation == store.generation() == start + 5
    assert [(c.spec.name, c.version, len(c.entries), c.incremental) for c in banks] == [("acme-scams", 4, 3, False),
                                                                                       ("shared-gore", 1, 0, False)]
    epoch = banks[0].epoch
    # a reader holding acme-scams at version 4 reads only what is added after it, while nothing is removed
    assert store.add("acme-scams", [Entry("md5", "0" * 31 + "2", "case-3")]) == 5
    _, since = store.changes({"acme-scams": (epoch, 4), "shared-gore": (banks[1].epoch, 1)})
    assert [(c.spec.name, c.version, c.entries, c.incremental) for c in since] == [
        ("acme-scams", 5, [Entry("md5", "0" * 31 + "2", "case-3")], True), ("shared-gore", 1, [], True)]
    _, other = store.changes({"acme-scams": (epoch + 100, 4)})  # another bank that had the name: all of it
    assert not other[0].incremental and len(other[0].entries) == 4
    assert store.remove("acme-scams", [Entry("md5", "0" * 31 + "2")]) == (1, 6)
    generation, banks = store.changes({"acme-scams": (epoch, 5)})  # lost a hash since 5: all of it again
    assert not banks[0].incremental and len(banks[0].entries) == 3 and banks[0].epoch == epoch
    loaded = LoadedBanks.load(store)
    assert loaded.generation == generation and [b.spec.name for b in loaded.visible_to("globex")] == ["shared-gore"]
    assert loaded.banks[0].exact[("md5", MD5)] == "case-1" and len(loaded.banks[0].pdq) == 1

    assert store.remove("acme-scams", [Entry("pdq", PDQ), Entry("pdq", "00" * 32)], owner="acme") == (1, 7)
    assert store.remove_content("acme-scams", ["case-1", "case-1"]) == (2, 8)
    assert store.update_bank(BankSpec("acme-scams", owner="acme", category="spam")) == 9
    assert store.banks() == [(BankSpec("acme-scams", owner="acme", category="spam"), 9),
                             (BankSpec("shared-gore", shared=True, category="violence"), 1)]
    store.delete_bank("acme-scams", owner="acme")
    with pytest.raises(BankNotFoundError):
        store.delete_bank("acme-scams")
    assert store.bank("acme-scams") is None and store.entries("acme-scams") == []
    assert store.generation() == start + 11
    # created again under its name: another bank (another epoch), never extended from the old one's copy
    assert store.create_bank(BankSpec("acme-scams", owner="globex", category="spam")) == 1
    _, again = store.changes({"acme-scams": (epoch, 1)})
    assert again[0].epoch != epoch and not again[0].incremental
