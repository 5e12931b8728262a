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

    #: The bank store (services/match/banks.py): a SQLite file, unless `banks_dsn` is set.
    banks_path: str = "var/banks.sqlite"
    #: PostgreSQL holding the banks instead (services/match/banks_postgres.py): the database the routers'
    #: `lifecycle.postgres_dsn` names, so every replica of both reads what BankAdmin writes. Env
    #: AUDITMESH_BANKS_DSN (it may carry a password: set it from a secret; never in a repr or a log).
    banks_dsn: str = field(default="", repr=False)
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

    @property
    def store_location(self) -> str:
        """The bank store as logs and errors name it: the file, or PostgreSQL's user@host:port/db (no password)."""
        if self.banks_dsn:
            from services.router.control.postgres import describe_dsn

            return f"postgresql {describe_dsn(self.banks_dsn)}"
        return self.banks_path
