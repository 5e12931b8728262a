"""Prometheus export of an attachment's counters, read from the kernel at scrape time.

Metrics (labels `dev`, and `class`, `direction` = egress|ingress where relevant):

- `auditmesh_ebpf_class_packets_total`, `auditmesh_ebpf_class_bytes_total`: what the classifier put in
  each QoS class (`class="unclassified"` for traffic it left to HTB's default class).
- `auditmesh_ebpf_port_packets_total`, `auditmesh_ebpf_port_bytes_total`: per port rule (`port`,
  `tenant` = the rule's label).
- `auditmesh_ebpf_htb_sent_bytes_total`, `auditmesh_ebpf_htb_dropped_packets_total`: HTB's own class
  counters (egress), to compare with the classifier's.
- `auditmesh_ebpf_learnt_flows`: connections classified from their other direction.

Example::

    registry = CollectorRegistry()
    registry.register(AttachmentCollector(attachment.status))
    start_http_server(9108, registry=registry)
"""

from __future__ import annotations

from typing import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ebpf.loader import Status
from ebpf.plan import UNCLASSIFIED


class AttachmentCollector(Collector):
    """Collects from `read_status()` on every scrape."""

    def __init__(self, read_status: Callable[[], Status]) -> None:
        self._read_status = read_status

    def collect(self) -> Iterator[Metric]:
        status = self._read_status()
        dev = status.target.dev
        packets = CounterMetricFamily("auditmesh_ebpf_class_packets", "Packets the classifier put in a QoS class",
                                      labels=["dev", "class", "direction"])
        octets = CounterMetricFamily("auditmesh_ebpf_class_bytes", "Bytes (on the wire) the classifier put in a "
                                     "QoS class", labels=["dev", "class", "direction"])
        for name, by_direction in [*((c.name, c.bpf) for c in status.classes), (UNCLASSIFIED, status.unclassified)]:
            for direction, counter in by_direction.items():
                packets.add_metric([dev, name, direction], counter.packets)
                octets.add_metric([dev, name, direction], counter.bytes)
        yield packets
        yield octets
        yield from _port_metrics(status)
        yield from _htb_metrics(status)
        yield _flows(status)


def _flows(status: Status) -> Metric:
    gauge = GaugeMetricFamily("auditmesh_ebpf_learnt_flows", "Connections classified from their other direction",
                              labels=["dev"])
    gauge.add_metric([status.target.dev], status.learnt_flows)
    return gauge


def _port_metrics(status: Status) -> Iterator[Metric]:
    labels = ["dev", "port", "tenant", "class", "direction"]
    packets = CounterMetricFamily("auditmesh_ebpf_port_packets", "Packets classified by a port rule", labels=labels)
    octets = CounterMetricFamily("auditmesh_ebpf_port_bytes", "Bytes classified by a port rule", labels=labels)
    for rule in status.ports:
        for direction, counter in rule.bpf.items():
            values = [status.target.dev, str(rule.port), rule.label, rule.qos_class, direction]
            packets.add_metric(values, counter.packets)
            octets.add_metric(values, counter.bytes)
    yield packets
    yield octets


def _htb_metrics(status: Status) -> Iterator[Metric]:
    sent = CounterMetricFamily("auditmesh_ebpf_htb_sent_bytes", "Bytes an HTB class sent", labels=["dev", "class"])
    dropped = CounterMetricFamily("auditmesh_ebpf_htb_dropped_packets", "Packets an HTB class's queue dropped",
                                  labels=["dev", "class"])
    for htb_class in status.classes:
        if htb_class.htb is not None:
            sent.add_metric([status.target.dev, htb_class.name], htb_class.htb.bytes)
            dropped.add_metric([status.target.dev, htb_class.name], htb_class.htb.drops)
    yield sent
    yield dropped
