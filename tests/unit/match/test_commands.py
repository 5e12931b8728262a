"""`auditmesh banks`: create, add texts and images, import a CSV, list; problems named with file and line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from services.cli import main
from services.match.banks import BankStore, LoadedBanks
from services.match.matcher import match_image, match_text
from services.match.signals import image_signals, text_signals
from tests.unit.match.conftest import rgb, variants


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, object]:
    code = main(["banks", *args])
    captured = capsys.readouterr()
    return code, json.loads(captured.out) if code == 0 else captured.err


def test_a_bank_made_from_the_command_line_matches_reposts_and_edits(tmp_path: Path, photos: dict[str, bytes],
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    store = str(tmp_path / "banks.sqlite")
    image = tmp_path / "known.png"
    image.write_bytes(photos["chelsea.png"])
    assert run(capsys, "--store", store, "create", "waves", "--shared", "--category", "spam", "--action", "review")[0] == 0
    code, added = run(capsys, "--store", store, "add", "waves", "--text", "FREE crypto airdrop, connect your wallet now",
                      "--image", str(image))
    assert code == 0 and added == {"bank": "waves", "added": 5, "version": 2}
    csv = tmp_path / "hashes.csv"
    csv.write_text("signal_type,value,content_id\nmd5," + "a" * 32 + ",case-9\n")
    assert run(capsys, "--store", store, "import", "waves", str(csv))[1] == {"bank": "waves", "rows": 1, "version": 3}
    listed = run(capsys, "--store", store, "list")[1]
    assert listed == [{"bank": "waves", "version": 3, "owner": None, "shared": True, "category": "spam", "action": "review",
                       "negative": False, "enabled_ratio": 1.0,
                       "hashes": {"md5": 2, "pdq": 1, "sha256": 1, "text_sha256": 1, "text_simhash": 1}}]
    banks = LoadedBanks.load(BankStore(tmp_path / "banks.sqlite")).banks
    repost = variants(photos["chelsea.png"])["jpeg_60"]
    assert [m.content_id for m in match_image(banks, image_signals(repost, rgb(repost)))] == ["known.png"]
    assert [m.action for m in match_text(banks, text_signals("free crypto AIRDROP 🚀 connect your wallet now!!"))] == ["review"]


def test_problems_name_the_field_or_the_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = str(tmp_path / "banks.sqlite")
    code, err = run(capsys, "--store", store, "create", "Bad Name", "--shared", "--category", "spam")
    assert code == 2 and "name: 1-64 lower-case" in str(err)
    run(capsys, "--store", store, "create", "ok", "--owner", "acme", "--category", "hate")
    csv = tmp_path / "hashes.csv"
    csv.write_text("pdq,abc\n")
    code, err = run(capsys, "--store", store, "import", "ok", str(csv))
    assert code == 2 and f"{csv}: line 1: value: a pdq hash is 64 lower-case hex digits" in str(err)
    code, err = run(capsys, "--store", store, "add", "ok", "--image", str(csv))
    assert code == 2 and "could not be decoded" in str(err)


def test_a_file_and_a_database_together_are_refused_and_an_unreachable_one_is_named(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from services.launcher import free_base_port

    monkeypatch.setenv("AUDITMESH_BANKS_DSN", f"postgresql://auditmesh:s3cret@127.0.0.1:{free_base_port(1)}/auditmesh")
    code, err = run(capsys, "--store", str(tmp_path / "banks.sqlite"), "list")
    assert code == 2 and "give one of them" in str(err)
    code, err = run(capsys, "list")
    assert code == 2 and "cannot connect to PostgreSQL at auditmesh@127.0.0.1" in str(err) and "s3cret" not in str(err)
