"""The match service's own settings (`match:` in config/match.yaml), validated on load."""

from __future__ import annotations

from dataclasses import dataclass, field

from services.match.flood import FloodSettings

__all__ = ["FloodSettings", "MatchSettings"]


@dataclass(frozen=True)
class MatchSettings:
    """Where the banks are, how often the service looks for changes and how stale its banks may get before
    it reports not ready, whether images are also queried in their 7 other rotations and flips, and the
    flood guard."""

    #: The bank store (services/match/banks.py).
    banks_path: str = "var/banks.sqlite"
    #: Seconds between looks at the store's generation (each replica adds up to 20 % jitter).
    reload_interval_s: float = 5.0
    #: Seconds the loaded banks may go without being confirmed current (the store read and the same
    #: generation, or a new one loaded) before the service reports not ready (ModelReady, grpc.health):
    #: a replica that cannot read its store stops taking traffic instead of matching an old set.
    max_stale_s: float = 60.0
    #: Also query the 7 other rotations and flips of each image (8 PDQ hashes instead of 1).
    dihedral: bool = False
    #: A banked hash matching far above its own baseline (services/match/flood.py).
    flood: FloodSettings = field(default_factory=FloodSettings)

    def __post_init__(self) -> None:
        if not self.banks_path:
            raise ValueError("banks_path must name the bank store's file")
        if self.reload_interval_s <= 0:
            raise ValueError(f"reload_interval_s must be > 0, got {self.reload_interval_s}")
        if self.max_stale_s < 2 * self.reload_interval_s:
            raise ValueError(f"max_stale_s must be at least twice reload_interval_s ({2 * self.reload_interval_s:g}), "
                             f"got {self.max_stale_s}")
