"""Hash lists in and out: auditmesh's CSV, ThreatExchange signal files, HMA's banked-content JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from services.cli import BANK_FORMATS, main
from services.match.banks import BankError, BankSpec, BankStore, Entry, LoadedBanks
from services.match.formats import FORMATS, parse, render
from services.match.matcher import match_text
from services.match.signals import text_signals

PDQ = "f8f8f0cee0f4a84f06370a32038f67f0b36e2ed596623e1d33e6339c4e9c9b22"
MD5 = "d41d8cd98f00b204e9800998ecf8427e"
SHA = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
SPAM = "FREE crypto airdrop today only, connect your wallet at the link"


def test_the_cli_offers_exactly_the_formats_there_are() -> None:
    assert BANK_FORMATS == FORMATS


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_round_trips(fmt: str) -> None:
    entries = [Entry("pdq", PDQ, "case-1"), Entry("md5", MD5, "case-1"), Entry("sha256", SHA, ""),
               Entry("pdq", PDQ.replace("f", "e"), "case-2")]
    back = parse(fmt, render(fmt, entries))
    if fmt == "threatexchange":  # the format has no content ids
        assert back == [Entry(e.signal, e.value) for e in entries]
    else:
        assert sorted(back, key=repr) == sorted(entries, key=repr)


def test_threatexchange_names_are_read_and_raw_text_is_hashed_as_a_query_is(tmp_path: Path) -> None:
    data = f"# from a hash-sharing partner\npdq {PDQ.upper()}\nphoto_md5 {MD5}\n\nraw_text {SPAM}\n"
    entries = parse("threatexchange", data)
    assert [e.signal for e in entries] == ["pdq", "md5", "text_simhash", "text_sha256"]
    assert entries[0].value == PDQ
    store = BankStore(tmp_path / "banks.sqlite")
    store.put_bank(BankSpec("waves", shared=True, category="spam"))
    store.add("waves", entries)
    edited = "free CRYPTO airdrop today only!! connect ur wallet at the link 👉 https://x.io/a"
    assert [m.bank for m in match_text(LoadedBanks.load(store).banks, text_signals(edited))] == ["waves"]


@pytest.mark.parametrize(("data", "problem"), [
    (f"video_md5 {MD5}\n", "line 1: signal type 'video_md5' is not matched here"),
    (f"pdq {PDQ}\nurl https://x.io\n", "line 2: signal type 'url' is not matched here"),
    ("pdq\n", "line 1: expected '<signal_type> <signal>'"),
    (f"pdq {PDQ}\nsha1 abc\n", "line 2: unknown signal type 'sha1'"),
    ("pdq abc\n", "line 1: value: a pdq hash is 64 lower-case hex digits"),
    ("raw_text hi\n", "line 1: text 'hi': its canonical form 'hi' says too little"),
])
def test_threatexchange_problems_name_the_line(data: str, problem: str) -> None:
    with pytest.raises(BankError) as raised:
        parse("threatexchange", data)
    assert str(raised.value).startswith(problem)


def test_hma_json_objects_and_bare_signal_bodies() -> None:
    data = json.dumps([{"id": 17, "signals": {"pdq": PDQ, "photo_md5": MD5}},
                       {"pdq": PDQ.replace("f", "0")},
                       {"id": 18, "signals": {"raw_text": SPAM}, "metadata": {"content_id": "wave-3"}}])
    entries = parse("hma_json", data)
    assert entries[:3] == [Entry("pdq", PDQ, "17"), Entry("md5", MD5, "17"), Entry("pdq", PDQ.replace("f", "0"))]
    assert {e.signal for e in entries[3:]} == {"text_simhash", "text_sha256"}
    assert {e.content_id for e in entries[3:]} == {"wave-3"}
    rendered = json.loads(render("hma_json", entries[:2]))
    assert rendered == [{"id": "17", "signals": {"pdq": PDQ, "md5": MD5}}]


@pytest.mark.parametrize(("data", "problem"), [
    ("[1, 2", "not JSON"),
    ("[3]", "[0]: expected an object"),
    ('[{"id": 1, "signals": {}}]', "[0]: 'signals' must be a non-empty object"),
    (f'[{{"id": 1, "signals": {{"pdq": "{PDQ}"}}}}, {{"id": 2, "signals": {{"video_tmk_pdqf": "00"}}}}]',
     "[1].signals: signal type 'video_tmk_pdqf' is not matched here"),
    ('[{"id": 1, "signals": {"pdq": 5}}]', "[0].signals.pdq: a hash is a string"),
])
def test_hma_json_problems_name_the_index(data: str, problem: str) -> None:
    with pytest.raises(BankError) as raised:
        parse("hma_json", data)
    assert str(raised.value).startswith(problem)


def test_csv_problems_and_unknown_formats() -> None:
    with pytest.raises(BankError, match="line 3: expected signal_type,value"):
        parse("csv", f"signal_type,value,content_id\npdq,{PDQ}\npdq\n")
    with pytest.raises(BankError, match="format: one of csv, threatexchange, hma_json"):
        parse("xml", "")
    with pytest.raises(BankError, match="format: one of"):
        render("xml", [])


def test_the_command_line_imports_exports_and_removes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = str(tmp_path / "banks.sqlite")
    assert main(["banks", "--store", store, "create", "known", "--owner", "acme", "--category", "violence"]) == 0
    te = tmp_path / "partner.txt"
    te.write_text(f"pdq {PDQ}\nphoto_md5 {MD5}\n")
    assert main(["banks", "--store", store, "import", "known", str(te), "--format", "threatexchange"]) == 0
    hma = tmp_path / "hma.json"
    hma.write_text(json.dumps([{"id": "case-7", "signals": {"sha256": SHA}}]))
    assert main(["banks", "--store", store, "import", "known", str(hma), "--format", "hma_json"]) == 0
    capsys.readouterr()
    assert main(["banks", "--store", store, "export", "known"]) == 0
    exported = capsys.readouterr().out
    assert sorted(parse("csv", exported), key=repr) == sorted(
        [Entry("pdq", PDQ), Entry("md5", MD5), Entry("sha256", SHA, "case-7")], key=repr)
    assert main(["banks", "--store", store, "remove", "known", "--content-id", "case-7", "--hash", f"md5:{MD5.upper()}"]) == 0
    assert json.loads(capsys.readouterr().out) == {"bank": "known", "removed": 2, "version": 5}
    assert main(["banks", "--store", store, "export", "known", "--format", "threatexchange"]) == 0
    assert capsys.readouterr().out == f"pdq {PDQ}\n"
    assert main(["banks", "--store", store, "import", "nobank", str(te)]) == 2
    assert "bank 'nobank' does not exist" in capsys.readouterr().err


def test_a_byte_order_mark_and_a_header_after_comments_are_read() -> None:
    assert parse("csv", f"\ufeff# exported 2026-12-07\nsignal_type,value,content_id\npdq,{PDQ},c-1\n") == [
        Entry("pdq", PDQ, "c-1")]
    assert parse("threatexchange", f"\ufeffpdq {PDQ}\n") == [Entry("pdq", PDQ)]
    assert parse("hma_json", f'\ufeff[{{"id": null, "signals": {{"pdq": "{PDQ}"}}}}]') == [Entry("pdq", PDQ)]
    with pytest.raises(BankError, match=r"^\[0\].signals.raw_text: text 'hi'"):
        parse("hma_json", '[{"id": 1, "signals": {"raw_text": "hi"}}]')


def test_a_banked_text_longer_than_what_is_hashed_still_matches_itself(tmp_path: Path) -> None:
    from services.match.formats import text_entries
    from services.match.signals import MAX_TEXT_CHARS

    text = ("Limited offer, claim your crypto airdrop now at the official page. " * 600)[:MAX_TEXT_CHARS + 9_000]
    store = BankStore(tmp_path / "banks.sqlite")
    store.put_bank(BankSpec("long", shared=True, category="spam"))
    store.add("long", text_entries(text, "wall-1"))
    found = match_text(LoadedBanks.load(store).banks, text_signals(text[:MAX_TEXT_CHARS]))  # as the service hashes it
    assert [(m.signal_type, m.distance) for m in found] == [("text_sha256", 0)]


def test_raw_texts_hashed_on_import_are_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    from services.match import formats

    monkeypatch.setattr(formats, "MAX_RAW_TEXTS", 1)
    with pytest.raises(BankError, match="^line 2: more than 1 raw texts in one list"):
        parse("threatexchange", f"raw_text {SPAM}\nraw_text {SPAM} again\n")
    with pytest.raises(BankError, match=r"^\[1\].signals.raw_text: more than 1 raw texts"):
        parse("hma_json", json.dumps([{"signals": {"raw_text": SPAM}}, {"signals": {"raw_text": SPAM + "!"}}]))
