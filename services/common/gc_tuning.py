"""Garbage-collector settings for a long-running server process, applied once it has started.

Measured on the router (bench/router_cpu.py, 14k text items, Python 3.11 defaults): the cyclic
collector took about 13 % of the process's CPU. Most of it was full (generation 2) collections,
each scanning the ~250k objects that imports, compiled policies and lexicons leave behind (74 ms a
pass, a latency spike each time), and the rest frequent young collections (the default threshold of
700 allocations is reached several times per request).

`tune_for_serving` therefore
* freezes what exists when the server starts (`gc.freeze`): those objects live as long as the
  process, so the collector stops scanning them. They are still freed by reference counting; only a
  reference cycle among them would stay until exit;
* raises the young-generation threshold, so short-lived request objects mostly die (by reference
  counting) before a collection looks at them. Memory cost: at most `gen0` extra container objects
  (a few MB).

Example::

    await server.start()
    tune_for_serving()   # after start-up, before the first request
"""

from __future__ import annotations

import gc
from dataclasses import dataclass

__all__ = ["GcSettings", "tune_for_serving"]


@dataclass(frozen=True)
class GcSettings:
    """What `tune_for_serving` applied (for a start-up log line)."""

    frozen_objects: int
    thresholds: tuple[int, int, int]


def tune_for_serving(gen0: int = 50_000, gen1: int = 20, gen2: int = 100) -> GcSettings:
    """Freeze the start-up heap and set the collection thresholds (see the module docstring)."""
    if gen0 < 1 or gen1 < 1 or gen2 < 1:
        raise ValueError(f"GC thresholds must be >= 1, got {(gen0, gen1, gen2)}")
    gc.collect()  # what start-up left as garbage is freed, not frozen
    gc.freeze()
    gc.set_threshold(gen0, gen1, gen2)
    return GcSettings(gc.get_freeze_count(), (gen0, gen1, gen2))
