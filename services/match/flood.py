"""The flood guard (issue 42): a banked hash that suddenly matches far more content than it ever did is
more likely a bad entry (a blank frame, a logo, a meme template banked by mistake: ThreatExchange#1873's
over-matching) than a wave of abuse, and acting on it blocks innocent content at scale. Pure logic, no
clock of its own.

Each key (bank, signal type, content id) is counted in fixed windows of `window_s`. Its baseline is an
exponentially weighted mean of its earlier windows' counts (weight `ALPHA` for the newest; windows with
no match count as 0). A key *floods* while its count in the current window reaches `min_matches` and is
at least `factor` times its baseline (a baseline under 1 counts as 1). The guard reports floods (the
match service logs each new one and exports them as metrics); with `quarantine`, the service does not act
on a flooding key's matches (they are returned suppressed) until a window ends below the bar. Memory is
bounded: at most `max_tracked` keys, the least recently matched forgotten first.

Example::

    guard = FloodGuard(FloodSettings(window_s=60, min_matches=200, factor=20))
    if guard.observe(("known_memes", "pdq", "case-7"), now=time.monotonic()):
        ...  # flooding: report it (and, with quarantine, do not act on it)
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass
from typing import Hashable

__all__ = ["ALPHA", "Flood", "FloodGuard", "FloodSettings"]

#: Weight of the newest finished window in a key's baseline.
ALPHA = 0.3


@dataclass(frozen=True)
class FloodSettings:
    """`flood:` in config/match.yaml (validated on load)."""

    #: Length of one counting window, seconds.
    window_s: float = 60.0
    #: Matches of one key in one window below which it never floods.
    min_matches: int = 200
    #: How many times its baseline a key's window count must be to flood.
    factor: float = 20.0
    #: Do not act on a flooding key's matches (they are returned suppressed), besides reporting it.
    quarantine: bool = False
    #: Keys remembered at most (the least recently matched are forgotten).
    max_tracked: int = 100_000

    def __post_init__(self) -> None:
        if self.window_s <= 0:
            raise ValueError(f"window_s must be > 0, got {self.window_s}")
        if self.min_matches < 1:
            raise ValueError(f"min_matches must be >= 1, got {self.min_matches}")
        if self.factor < 1:
            raise ValueError(f"factor must be >= 1, got {self.factor}")
        if self.max_tracked < 1:
            raise ValueError(f"max_tracked must be >= 1, got {self.max_tracked}")


@dataclass
class _Key:
    window: int
    count: int = 0
    baseline: float = 0.0
    flooding: bool = False


@dataclass(frozen=True)
class Flood:
    """A key flooding now: its count in the current window and its baseline."""

    key: Hashable
    count: int
    baseline: float


class FloodGuard:
    """See the module docstring. Not thread-safe: the match service calls it from its one batch thread."""

    def __init__(self, settings: FloodSettings = FloodSettings()) -> None:
        self.settings = settings
        self._keys: OrderedDict[Hashable, _Key] = OrderedDict()
        #: Keys that started flooding since the last `take_new`.
        self._new: list[Flood] = []
        #: Flooding keys and the window they were last seen flooding in (read by `active` at scrape time).
        self._active: dict[Hashable, int] = {}

    def observe(self, key: Hashable, now: float) -> bool:
        """Count one match of `key` at `now` (seconds, any monotonic clock); whether it floods."""
        window = math.floor(now / self.settings.window_s)
        state = self._keys.get(key)
        if state is None:
            state = _Key(window)
            self._keys[key] = state
            while len(self._keys) > self.settings.max_tracked:
                self._active.pop(self._keys.popitem(last=False)[0], None)
        else:
            self._keys.move_to_end(key)
            self._roll(key, state, window)
        state.count += 1
        if state.count >= self._bar(state) and not state.flooding:
            state.flooding = True
            self._active[key] = window
            self._new.append(Flood(key, state.count, state.baseline))
        return state.flooding

    def flooding(self, now: float) -> list[Flood]:
        """Every key flooding in the window of `now`."""
        window = math.floor(now / self.settings.window_s)
        out = []
        for key, state in self._keys.items():
            self._roll(key, state, window)
            if state.flooding:
                out.append(Flood(key, state.count, state.baseline))
        return out

    def active(self, now: float) -> list[Hashable]:
        """Keys flooding in the window of `now`, as last seen (safe to call from another thread: reads only)."""
        window = math.floor(now / self.settings.window_s)
        return [key for key, seen in list(self._active.items()) if seen == window]

    def take_new(self) -> list[Flood]:
        """Floods that started since the last call (each reported once)."""
        new, self._new = self._new, []
        return new

    def _bar(self, state: _Key) -> float:
        return max(self.settings.min_matches, self.settings.factor * max(state.baseline, 1.0))

    def _roll(self, key: Hashable, state: _Key, window: int) -> None:
        """Close the key's finished windows: fold their counts into its baseline (a flooding window adds at most
        its bar: a flood must not become the normal a later flood is measured against). A key still flooding
        when its window ended (the count at or above the bar) floods on into the next window, so a quarantine
        lasts until a window ends below the bar; a window without matches ends it."""
        if window <= state.window:
            return
        bar = self._bar(state)
        still = state.flooding and state.count >= bar and window == state.window + 1
        counted = min(state.count, bar) if state.flooding else state.count
        state.baseline = ALPHA * counted + (1 - ALPHA) * state.baseline
        state.baseline *= (1 - ALPHA) ** (window - state.window - 1)  # windows without a match count as 0
        state.window, state.count, state.flooding = window, 0, still
        if still:
            self._active[key] = window
        else:
            self._active.pop(key, None)
