"""The SQLite bank store keeps the bank store contract (tests/unit/match/bank_store_contract.py)."""

from __future__ import annotations

from pathlib import Path

from services.match.banks import BankStore
from tests.unit.match.bank_store_contract import check_bank_store_contract


def test_the_sqlite_store_keeps_the_contract(tmp_path: Path) -> None:
    store = BankStore(tmp_path / "banks.sqlite")
    try:
        check_bank_store_contract(store)
    finally:
        store.close()
