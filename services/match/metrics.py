"""The match service's own Prometheus metrics, read from the model at scrape time (besides the serving
kit's per-model request, batch and queue metrics):

- `auditmesh_match_bank_hashes{bank, signal}`: hashes loaded per bank and signal type;
- `auditmesh_match_index_bytes{bank}`: bytes of the bank's perceptual-hash vectors (32 per PDQ or SimHash);
- `auditmesh_match_banks_generation`, `auditmesh_match_banks_age_seconds` (since the loaded set was built),
  `auditmesh_match_banks_stale_seconds` (since it was last confirmed current; not ready past max_stale_s);
- `auditmesh_match_matches_total{bank, signal}`: acting matches (negative and suppressed ones aside);
- `auditmesh_match_floods_total{bank}` and `auditmesh_match_flooding_hashes{bank}` (services/match/flood.py);
- `auditmesh_match_item_seconds_total{kind}` / `auditmesh_match_items_total{kind}`: time spent hashing
  and searching items (text, image), so the mean per item is their ratio.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from services.match.model import MatchModel

__all__ = ["MatchCollector"]


class MatchCollector(Collector):
    """See the module docstring."""

    def __init__(self, model: MatchModel) -> None:
        self.model = model

    def collect(self) -> Iterator[Metric]:
        model = self.model
        banks = model.banks
        hashes = GaugeMetricFamily("auditmesh_match_bank_hashes", "Hashes loaded per bank and signal type",
                                   labels=["bank", "signal"])
        sizes = GaugeMetricFamily("auditmesh_match_index_bytes", "Bytes of a bank's perceptual-hash vectors",
                                  labels=["bank"])
        for bank in banks.banks:
            counts = {"pdq": len(bank.pdq), "text_simhash": len(bank.text)}
            for signal, _ in bank.exact:
                counts[signal] = counts.get(signal, 0) + 1
            for signal, count in sorted(counts.items()):
                hashes.add_metric([bank.spec.name, signal], count)
            sizes.add_metric([bank.spec.name], 32 * (len(bank.pdq) + len(bank.text)))
        yield hashes
        yield sizes
        yield GaugeMetricFamily("auditmesh_match_banks_generation", "Bank store generation loaded", value=banks.generation)
        yield GaugeMetricFamily("auditmesh_match_banks_age_seconds", "Seconds since the loaded banks were built",
                                value=max(0.0, time.time() - banks.loaded_at))
        yield GaugeMetricFamily("auditmesh_match_banks_stale_seconds",
                                "Seconds since the loaded banks were last confirmed current", value=model.stale_s)
        matches = CounterMetricFamily("auditmesh_match_matches", "Acting matches per bank and signal type",
                                      labels=["bank", "signal"])
        for (bank_name, signal), count in sorted(list(model.matches.items())):
            matches.add_metric([bank_name, signal], count)
        yield matches
        floods = CounterMetricFamily("auditmesh_match_floods", "Bank entries that started flooding", labels=["bank"])
        for bank_name, count in sorted(list(model.floods.items())):
            floods.add_metric([bank_name], count)
        yield floods
        flooding = GaugeMetricFamily("auditmesh_match_flooding_hashes", "Bank entries flooding in the current window",
                                     labels=["bank"])
        now_flooding: dict[str, int] = {}
        for flood in model.flood_snapshot():
            now_flooding[flood] = now_flooding.get(flood, 0) + 1
        for bank_name, count in sorted(now_flooding.items()):
            flooding.add_metric([bank_name], count)
        yield flooding
        seconds = CounterMetricFamily("auditmesh_match_item_seconds", "Seconds spent hashing and searching items",
                                      labels=["kind"])
        items = CounterMetricFamily("auditmesh_match_items", "Items hashed and searched", labels=["kind"])
        for kind, (spent, done) in sorted(list(model.work.items())):
            seconds.add_metric([kind], spent)
            items.add_metric([kind], done)
        yield seconds
        yield items
