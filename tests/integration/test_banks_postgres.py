"""Banks of known content in a real PostgreSQL (issue 42; a throwaway cluster started here): the store keeps
the bank store contract; two match services on one database (as replicas) both serve a bank written
through a router's BankAdmin store within their reload interval; racing creators of one name get one
bank; a router with `lifecycle.postgres_dsn` and no `banks_path` manages its banks there."""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path

import numpy as np
import psycopg
import pytest

from services.common.contracts import match as contract
from services.launcher import ROOT
from services.match.banks import BankExistsError, BankSpec, Entry
from services.match.banks_postgres import PostgresBankStore
from services.router.control.postgres import PostgresUnavailableError
from services.match.model import MatchModel
from services.match.settings import MatchSettings
from services.match.signals import text_signals
from services.router.config import load_router_config
from services.router.policy_lifecycle import PolicyLifecycle
from tests.unit.match.bank_store_contract import check_bank_store_contract

SPAM = "Earn $500 a day from home, no experience needed. DM me on telegram @richfast99 and I will show you how"


def test_the_postgres_store_keeps_the_contract(dsn: str) -> None:
    store = PostgresBankStore(dsn)
    try:
        check_bank_store_contract(store)
    finally:
        store.close()


def matches(model: MatchModel, tenant: str, text: str) -> list[contract.Match]:
    out = model.infer({"ITEM": np.array([[contract.encode_item(tenant, "text", text.encode())]], dtype=object)})
    return contract.decode_row({name: out[name][0] for name in out})[0]


def test_two_match_services_on_one_database_serve_what_an_admin_wrote(dsn: str) -> None:
    admin = PostgresBankStore(dsn)
    settings = MatchSettings(banks_dsn=dsn, reload_interval_s=0.1, max_stale_s=1.0)
    replicas = [MatchModel(PostgresBankStore(dsn, migrate=False), settings, watch=False) for _ in range(2)]
    try:
        assert all(matches(model, "acme", SPAM) == [] for model in replicas)
        admin.create_bank(BankSpec("acme-spam", owner="acme", category="spam"))
        admin.add("acme-spam", [Entry("text_simhash", text_signals(SPAM).simhash.hex(), "wave-1")], owner="acme")
        for model in replicas:
            assert model.reload_if_changed() and model.banks.generation == admin.generation()
            assert [(m.bank, m.bank_version, m.content_id) for m in matches(model, "acme", SPAM.replace("500", "700"))] \
                == [("acme-spam", 2, "wave-1")]
            assert matches(model, "globex", SPAM) == []  # another tenant's private bank
            assert not model.reload_if_changed() and model.serving_problem() is None
        # what a replica names as its bank store never carries the DSN's password
        assert replicas[0].model_files()[0].path.startswith("postgresql postgres@127.0.0.1:")
    finally:
        for model in replicas:
            model.close()
            model.store.close()
        admin.close()


def test_a_match_service_reads_as_a_role_that_may_only_select_the_bank_tables(dsn: str) -> None:
    with pytest.raises(PostgresUnavailableError, match="has schema migration 0, this match service reads .*: start a router"):
        PostgresBankStore(dsn, migrate=False)  # nothing created them yet, and a reader never does
    admin = PostgresBankStore(dsn)  # a router: migrates, writes
    admin.create_bank(BankSpec("shared-spam", shared=True, category="spam"))
    admin.add("shared-spam", [Entry("text_simhash", text_signals(SPAM).simhash.hex(), "wave-1")])
    with psycopg.connect(dsn, autocommit=True) as owner:
        owner.execute(b"CREATE ROLE banks_reader LOGIN")
        owner.execute(b"GRANT SELECT ON match_banks, match_entries, match_meta, auditmesh_schema_migrations TO banks_reader")
    reader = PostgresBankStore(dsn.replace("postgres@", "banks_reader@", 1), migrate=False)
    try:
        model = MatchModel(reader, MatchSettings(banks_dsn=dsn), watch=False)
        assert [m.content_id for m in matches(model, "acme", SPAM)] == ["wave-1"]
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            reader.create_bank(BankSpec("sneaky", shared=True, category="spam"))
    finally:
        reader.close()
        admin.close()


def test_racing_creators_of_one_name_get_one_bank(dsn: str) -> None:
    stores = [PostgresBankStore(dsn) for _ in range(4)]
    outcomes: list[str] = []
    start = threading.Barrier(len(stores))

    def create(store: PostgresBankStore, owner: str) -> None:
        start.wait()
        try:
            store.create_bank(BankSpec("contested", owner=owner, category="spam"))
            outcomes.append(owner)
        except BankExistsError:
            outcomes.append("exists")
    threads = [threading.Thread(target=create, args=(store, f"tenant-{i}")) for i, store in enumerate(stores)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    winners = [o for o in outcomes if o != "exists"]
    assert len(outcomes) == 4 and len(winners) == 1
    found = stores[0].bank("contested")
    assert found is not None and found[0].owner == winners[0] and found[1] == 1
    for store in stores:
        store.close()


async def test_a_router_with_postgres_manages_its_banks_there(dsn: str, tmp_path: Path) -> None:
    config = load_router_config(ROOT / "config" / "router.yaml")
    # the SQLite fallback would be banks.sqlite beside store_path: here, in tmp_path
    settings = replace(config.lifecycle, postgres_dsn=dsn, banks_path="", store_path=str(tmp_path / "policy.sqlite"),
                       labels_path=str(tmp_path / "labels.sqlite"), review_tasks_path=str(tmp_path / "reviews.sqlite"))
    lifecycle = PolicyLifecycle.open(replace(config, lifecycle=settings, policies_dir=str(ROOT / "config" / "policies"),
                                             tenants_file=str(ROOT / "config" / "tenants.yaml")))
    try:
        assert lifecycle.banks is not None and isinstance(lifecycle.banks.store, PostgresBankStore)
        lifecycle.banks.store.create_bank(BankSpec("shared-spam", shared=True, category="spam"))
        reader = PostgresBankStore(dsn)
        assert [spec.name for spec, _ in reader.banks()] == ["shared-spam"]
        reader.close()
        assert not (tmp_path / "banks.sqlite").exists()  # no SQLite bank file beside the store
    finally:
        await lifecycle.close()
