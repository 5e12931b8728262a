"""URL and keyword features for the spam head, computed without the network.

* URLs are found in plain and defanged form (`hxxp://`, `example[.]com`, `example(.)com`, `[dot]`);
  defanging is itself a feature (legitimate senders do not defang their own links).
* `fraudurl` (MIT; LightGBM trees as JSON with its own Public Suffix List snapshot) gives a phishing
  probability from the URL text alone: a feature, never a verdict (it calls some ordinary URLs FRAUD).
* `antispam-link-shorteners` (MIT) lists 1,490 shortener domains.
* Brand-in-foreign-domain: a brand name from `services/text/data/spam_signals.yaml` inside a host
  whose registrable domain is not one of that brand's own.
* Keyword families (same file): prize, urgency, credentials, money, crypto, ... as regex counts.

A URL signal alone never blocks: these are inputs to the calibrated spam head.

Example::

    signals = SpamSignals.load()
    features = signals.features("Verify your account at paypal-secure[.]xyz/login")
    features["url_defanged"], features["url_brand_mismatch"]   # (1.0, 1.0)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

import yaml

__all__ = ["DEFAULT_SIGNALS_PATH", "SpamSignals", "UrlMatch", "find_urls"]

DEFAULT_SIGNALS_PATH = Path(__file__).resolve().parent / "data" / "spam_signals.yaml"
FORMAT = "auditmesh-spam-signals/1"
_DOT = r"(?:\.|\[\.\]|\(\.\)|\[dot\]|\(dot\)| dot )"
# The lookbehind keeps a match from starting inside a word: without it every letter of a long text
# starts a host attempt that runs to the word's end (quadratic in word length, ~3 ms per 5,000 chars).
_URL = re.compile(
    r"(?<![a-z0-9-])(?P<scheme>h(?:tt|xx)ps?(?::|\[:\])//)?(?P<host>(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?" + _DOT + r")+"
    r"(?:[a-z]{2,24}))(?P<path>/[^\s]*)?", re.IGNORECASE)
_DEFANGED = re.compile(r"hxxp|\[\.\]|\(\.\)|\[dot\]|\(dot\)|\[:\]", re.IGNORECASE)
_COMMON_WORD_TLDS = frozenset({"txt", "jpg", "png", "pdf", "doc", "docx", "exe", "zip", "py", "js", "md"})


@dataclass(frozen=True)
class UrlMatch:
    """One URL in the text: its span, its refanged form, its host, and whether it was defanged."""

    start: int
    end: int
    url: str
    host: str
    defanged: bool


def find_urls(text: str) -> list[UrlMatch]:
    """URLs with a scheme, `www.`, a path or a dotted host with a plausible TLD, plain or defanged.

    Example::

        >>> [u.host for u in find_urls("see hxxps://evil[.]example/x and bbc.co.uk")]
        ['evil.example', 'bbc.co.uk']
    """
    found = []
    for match in _URL.finditer(text):
        raw = match.group()
        host = re.sub(_DOT, ".", match.group("host"), flags=re.IGNORECASE).lower()
        tld = host.rsplit(".", 1)[-1]
        if tld in _COMMON_WORD_TLDS or (not match.group("scheme") and "." not in host.strip(".")):
            continue
        if not match.group("scheme") and not match.group("path") and not host.startswith("www.") and len(tld) < 2:
            continue
        refanged = re.sub(r"hxxp", "http", re.sub(_DOT, ".", raw, flags=re.IGNORECASE), flags=re.IGNORECASE)
        refanged = refanged.replace("[:]", ":")
        if not refanged.lower().startswith("http"):
            refanged = "http://" + refanged
        found.append(UrlMatch(match.start(), match.end(), refanged, host, bool(_DEFANGED.search(raw))))
    return found


@dataclass(frozen=True)
class SpamSignals:
    """The compiled data file plus the fraudurl model and shortener list."""

    brands: Mapping[str, frozenset[str]]
    families: Mapping[str, re.Pattern[str]]

    @classmethod
    def load(cls, path: Path = DEFAULT_SIGNALS_PATH) -> SpamSignals:
        """Read and validate the data file (ValueError naming the file and key)."""
        document = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        if not isinstance(document, dict) or document.get("format") != FORMAT:
            raise ValueError(f"{path}: key 'format' must be {FORMAT!r}")
        brands = document.get("brands")
        families = document.get("keyword_families")
        if not isinstance(brands, dict) or not all(isinstance(v, list) and v for v in brands.values()):
            raise ValueError(f"{path}: key 'brands' must map each brand to a non-empty list of domains")
        if not isinstance(families, dict):
            raise ValueError(f"{path}: key 'keyword_families' must be a mapping of name -> regex")
        compiled = {}
        for name, pattern in families.items():
            try:
                compiled[str(name)] = re.compile(str(pattern))
            except re.error as error:
                raise ValueError(f"{path}: keyword_families.{name} is not a valid regex ({error})") from None
        return cls({str(k): frozenset(str(d) for d in v) for k, v in brands.items()}, compiled)

    @property
    def family_names(self) -> tuple[str, ...]:
        """Keyword family names in file order (the feature columns `kw_<name>`)."""
        return tuple(self.families)

    def feature_names(self) -> tuple[str, ...]:
        """The keys `features` returns, in a fixed order."""
        return ("url_count", "url_defanged", "url_shortener", "url_brand_mismatch", "url_fraud_max",
                *(f"kw_{name}" for name in self.family_names), "kw_families")

    def features(self, text: str) -> dict[str, float]:
        """URL and keyword features of one (normalised) text, keyed as `feature_names()`."""
        urls = find_urls(text)
        shorteners = _shorteners()
        out: dict[str, float] = {
            "url_count": float(min(len(urls), 3)),
            "url_defanged": float(any(u.defanged for u in urls)),
            "url_shortener": float(any(_registrable(u.host) in shorteners or u.host in shorteners for u in urls)),
            "url_brand_mismatch": float(any(self.brand_mismatch(u.host) for u in urls)),
            "url_fraud_max": max((_fraud_probability(u.url) for u in urls), default=0.0),
        }
        families = 0
        for name, pattern in self.families.items():
            count = len(pattern.findall(text))
            out[f"kw_{name}"] = float(min(count, 3))
            families += count > 0
        out["kw_families"] = float(families)
        return out

    def url_spans(self, text: str) -> list[tuple[int, int]]:
        """Spans of the URLs in `text` (for evidence)."""
        return [(u.start, u.end) for u in find_urls(text)]

    def brand_mismatch(self, host: str) -> bool:
        """A brand name in `host` whose registrable domain is not one the brand owns."""
        registrable = _registrable(host)
        compact = host.replace("-", "")
        for brand, domains in self.brands.items():
            if brand in compact and registrable not in domains and host not in domains:
                return True
        return False


def _registrable(host: str) -> str:
    from fraudurl.psl import split_host

    try:
        result: Any = split_host(host)
    except Exception:  # noqa: BLE001 - an odd host is simply not registrable
        return host
    return str(result[1] or host)  # (subdomain, registrable domain, suffix, is_private)


@lru_cache(maxsize=1)
def _shorteners() -> frozenset[str]:
    from antispam_link_shorteners.antispam_link_shorteners import link_shorteners_list

    return frozenset(link_shorteners_list())


@lru_cache(maxsize=1)
def _fraud_model() -> Any:
    import os

    import fraudurl
    from fraudurl.model import Model

    return Model(os.path.join(os.path.dirname(fraudurl.__file__), "data", "model_safe.json"))


@lru_cache(maxsize=4096)
def _fraud_probability(url: str) -> float:
    from fraudurl.lexical import extract

    features = extract(url)
    if features.get("parse_error"):
        return 0.0
    return float(_fraud_model().predict(features, want_reasons=False)[1])
