"""Tests for services/text/urls.py: URL features without the network; none of them is a verdict."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.text.urls import SpamSignals, find_urls

SIGNALS = SpamSignals.load()


def test_defanged_urls_are_found_and_refanged() -> None:
    [url] = find_urls("verify at hxxps://paypal-secure[.]xyz/login now")
    assert url.defanged and url.host == "paypal-secure.xyz" and url.url.startswith("https://paypal-secure.xyz")
    assert not find_urls("see www.bbc.co.uk")[0].defanged


def test_plain_words_and_file_names_are_not_urls() -> None:
    assert find_urls("I had 3.5 beers, see notes.txt") == []


def test_brand_in_a_foreign_domain_is_flagged_but_not_on_its_own_domain() -> None:
    assert SIGNALS.brand_mismatch("paypal-secure-login.xyz")
    assert not SIGNALS.brand_mismatch("www.paypal.com")
    assert not SIGNALS.brand_mismatch("example.org")


def test_shortener_and_fraud_probability_features() -> None:
    short = SIGNALS.features("claim now bit.ly/claim-now-24")
    assert short["url_shortener"] == 1.0 and short["url_count"] == 1.0
    assert SIGNALS.features("paypal-secure-login.xyz/verify")["url_fraud_max"] > 0.5
    assert SIGNALS.features("no links here")["url_fraud_max"] == 0.0


def test_keyword_families_count_each_family_once() -> None:
    features = SIGNALS.features("urgent: you have won $1,000, claim your prize")
    assert features["kw_prize"] >= 1 and features["kw_urgency"] == 1 and features["kw_money"] >= 1
    assert features["kw_families"] == 3
    assert SIGNALS.features("see you at the park")["kw_families"] == 0


def test_bad_file_names_the_key(tmp_path: Path) -> None:
    bad = tmp_path / "signals.yaml"
    bad.write_text("format: auditmesh-spam-signals/1\nbrands: {x: []}\nkeyword_families: {}\n", encoding="utf-8")
    with pytest.raises(ValueError, match="signals.yaml: key 'brands'"):
        SpamSignals.load(bad)
