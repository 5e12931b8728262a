"""The match service's own settings (`match:` in config/match.yaml), validated on load."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MatchSettings"]


@dataclass(frozen=True)
class MatchSettings:
    """Where the banks are, how often the service looks for changes, whether images are also queried in
    their 7 other rotations and flips."""

    #: The bank store (services/match/banks.py).
    banks_path: str = "var/banks.sqlite"
    #: Seconds between looks at the store's generation (each replica adds up to 20 % jitter).
    reload_interval_s: float = 5.0
    #: Also query the 7 other rotations and flips of each image (8 PDQ hashes instead of 1).
    dihedral: bool = False

    def __post_init__(self) -> None:
        if not self.banks_path:
            raise ValueError("banks_path must name the bank store's file")
        if self.reload_interval_s <= 0:
            raise ValueError(f"reload_interval_s must be > 0, got {self.reload_interval_s}")
