"""Banks of known content (issue 42): named sets of hashes, each with what a match means, kept in one
SQLite file (the embedded store; `BankStore`) and loaded into in-memory indexes (`LoadedBanks`) that the
match model searches.

A bank (`BankSpec`) says which tenant owns it (`owner`) or that it is shared with every tenant (`shared:
true`, owner ""), the category and severity a match means and its default action (a policy may override
it), the Hamming distance a PDQ or text SimHash match may have, the share of content it is enabled for
(`enabled_ratio`, stable by the content's SHA-256, as HMA's matching_enabled_ratio: roll a new bank out
gradually), the lowest PDQ quality it matches (HMA discards hashes under 50), and whether it is
`negative` (known-benign content: a match there suppresses every other bank's match of the item).

Every change to a bank (its spec or its hashes) raises that bank's version and the store's generation;
a match names the bank version that produced it. `LoadedBanks.load` builds every index off the request
path; the match model swaps the whole object in one assignment (services/match/model.py).

Example::

    store = BankStore(Path("var/banks.sqlite"))
    store.put_bank(BankSpec("acme_csam_hashes", owner="acme", category="sexual", severity="high"))
    store.add("acme_csam_hashes", [Entry("pdq", "f8f8...", "case-1")])
    banks = LoadedBanks.load(store)
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import ChainMap
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Literal, Mapping, Protocol, Sequence

import numpy as np

from services.common.taxonomy import CATEGORIES, is_well_formed_custom_category
from services.match.index import HammingIndex, IndexLayers
from services.router.control.sqlite_wal import open_shared, write_transaction

__all__ = ["BankChanges", "BankError", "BankExistsError", "BankIndexes", "BankNotFoundError", "BankRepository", "BankSpec",
           "BankStore", "Entry", "LoadedBank", "LoadedBanks", "MAX_DELTA", "SIGNAL_TYPES", "incremental_since"]

SignalType = Literal["pdq", "md5", "sha256", "text_simhash", "text_sha256"]
#: Signal types and the hex length of their values.
SIGNAL_TYPES: dict[str, int] = {"pdq": 64, "md5": 32, "sha256": 64, "text_simhash": 64, "text_sha256": 64}
_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
_HEX = re.compile(r"[0-9a-f]+")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS banks (name TEXT PRIMARY KEY, spec TEXT NOT NULL, version INTEGER NOT NULL,
                                  updated REAL NOT NULL);
CREATE TABLE IF NOT EXISTS entries (bank TEXT NOT NULL, signal TEXT NOT NULL, value TEXT NOT NULL,
                                    content_id TEXT NOT NULL, PRIMARY KEY (bank, signal, value)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS entries_content ON entries (bank, content_id);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT OR IGNORE INTO meta (key, value) VALUES ('generation', 0);
"""
#: Columns added since the first schema (a file written before gets them, with these defaults): a bank's
#: `epoch` (the store generation that created it: a bank deleted and created again under its name is
#: another bank), `removed_at` (its version when hashes were last removed), an entry's `added` (the bank's
#: version that added it). With them a reader holding a bank at version v loads only what was added since.
_COLUMNS = (("banks", "epoch", "INTEGER NOT NULL DEFAULT 0"), ("banks", "removed_at", "INTEGER NOT NULL DEFAULT 0"),
            ("entries", "added", "INTEGER NOT NULL DEFAULT 0"))
_ADDED_INDEX = "CREATE INDEX IF NOT EXISTS entries_added ON entries (bank, added)"


class BankError(ValueError):
    """A bank or an entry that cannot be stored; the message names the field."""


class BankNotFoundError(BankError):
    """The bank named does not exist."""


class BankExistsError(BankError):
    """A bank of that name exists already."""


@dataclass(frozen=True)
class BankSpec:
    """What a bank is and what its matches mean (see the module docstring)."""

    name: str
    owner: str = ""
    shared: bool = False
    category: str = ""
    severity: Literal["low", "medium", "high"] = "high"
    action: Literal["review", "block"] = "block"
    pdq_distance: int = 31
    text_distance: int = 56
    enabled_ratio: float = 1.0
    min_pdq_quality: int = 50
    negative: bool = False
    description: str = ""

    def __post_init__(self) -> None:
        if not _NAME.fullmatch(self.name):
            raise BankError(f"name: 1-64 lower-case letters, digits, '_' or '-', got {self.name!r}")
        if self.shared == bool(self.owner):
            raise BankError("owner: a bank has an owner tenant, or is shared (shared: true, no owner); not both, not neither")
        if not self.negative and self.category not in CATEGORIES and not is_well_formed_custom_category(self.category):
            raise BankError(f"category: a taxonomy category or custom.<name> is required (what a match means), "
                            f"got {self.category!r}")
        if self.severity not in ("low", "medium", "high"):
            raise BankError(f"severity: low, medium or high, got {self.severity!r}")
        if self.action not in ("review", "block"):
            raise BankError(f"action: review or block, got {self.action!r}")
        if len(self.description) > 1000:
            raise BankError("description: at most 1,000 characters")
        if not 0 <= self.pdq_distance <= 128:
            raise BankError(f"pdq_distance: 0..128 bits, got {self.pdq_distance}")
        if not 0 <= self.text_distance <= 128:
            raise BankError(f"text_distance: 0..128 bits (of 256), got {self.text_distance}")
        if not 0.0 <= self.enabled_ratio <= 1.0:
            raise BankError(f"enabled_ratio: 0..1, got {self.enabled_ratio}")
        if not 0 <= self.min_pdq_quality <= 100:
            raise BankError(f"min_pdq_quality: 0..100, got {self.min_pdq_quality}")

    def visible_to(self, tenant: str) -> bool:
        """Whether `tenant`'s content is matched against this bank."""
        return self.shared or self.owner == tenant


@dataclass(frozen=True)
class Entry:
    """One hash in a bank: its signal type, its value (lower-case hex), the content it stands for."""

    signal: str
    value: str
    content_id: str = ""

    def __post_init__(self) -> None:
        length = SIGNAL_TYPES.get(self.signal)
        if length is None:
            raise BankError(f"signal: one of {', '.join(SIGNAL_TYPES)}, got {self.signal!r}")
        if len(self.value) != length or not _HEX.fullmatch(self.value):
            raise BankError(f"value: a {self.signal} hash is {length} lower-case hex digits, got {self.value[:80]!r}")
        if len(self.content_id) > 256 or not self.content_id.isprintable():
            raise BankError("content_id: at most 256 printable characters")


class BankRepository(Protocol):
    """What the match service (loading), BankAdmin and `auditmesh banks` (managing) need of a bank store:
    the embedded SQLite one below, or a shared backend that keeps the same contract (every change raises
    the bank's version and the store's generation, in one transaction; `changes` is one consistent read;
    BankNotFoundError / BankExistsError / BankError as documented; with `owner`, a change applies only if the
    bank is that owner's ("" = shared) when the change is written, else BankNotFoundError). Blocking;
    thread-safe."""

    def create_bank(self, spec: BankSpec) -> int: ...

    def put_bank(self, spec: BankSpec) -> int: ...

    def update_bank(self, spec: BankSpec) -> int: ...

    def delete_bank(self, name: str, *, owner: str | None = None) -> None: ...

    def add(self, bank: str, entries: Sequence[Entry], *, owner: str | None = None) -> int: ...

    def remove(self, bank: str, entries: Sequence[Entry], *, owner: str | None = None) -> tuple[int, int]: ...

    def remove_content(self, bank: str, content_ids: Sequence[str], *, owner: str | None = None) -> tuple[int, int]: ...

    def bank(self, name: str) -> tuple[BankSpec, int] | None: ...

    def banks(self) -> list[tuple[BankSpec, int]]: ...

    def counts(self, bank: str) -> dict[str, int]: ...

    def entries(self, bank: str) -> list[Entry]: ...

    def changes(self, held: Mapping[str, tuple[int, int]]) -> tuple[int, list[BankChanges]]: ...

    def generation(self) -> int: ...

    def close(self) -> None: ...


class BankStore:
    """Banks and their hashes in one SQLite file (WAL, 0600). Thread-safe. A `BankRepository`."""

    def __init__(self, path: Path, *, clock: Callable[[], float] = time.time) -> None:
        self.path = path
        self._clock = clock
        self._lock = threading.Lock()
        self._db = open_shared(path)
        self._db.executescript(_SCHEMA)
        with write_transaction(self._db):  # one process adds the columns (a router and a match service start together)
            upgraded = False
            for table, column, declaration in _COLUMNS:
                if column not in {row[1] for row in self._db.execute(f"PRAGMA table_info({table})")}:
                    self._db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declaration}")
                    upgraded = True
            self._db.execute(_ADDED_INDEX)
            # a file written by code before the versioned entries: not trusted for incremental reads until a
            # write of this code re-stamps every bank (`_stamp`); a file of this code: trusted as it is
            self._db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('versioned', -1)" if upgraded else
                             "INSERT OR IGNORE INTO meta (key, value) SELECT 'versioned', value FROM meta WHERE key = 'generation'")

    def create_bank(self, spec: BankSpec) -> int:
        """Create a new bank; BankExistsError when one of that name exists (`put_bank` replaces a spec on
        purpose: re-creating by mistake must not hand a bank's hashes to another owner). The check and the
        insert are one write transaction, so two callers racing for a name cannot both create it."""
        def insert(version: int) -> None:
            if self._db.execute("SELECT 1 FROM banks WHERE name = ?", (spec.name,)).fetchone() is not None:
                raise BankExistsError(f"bank {spec.name!r} exists; delete it first, or change its settings on purpose")
            self._db.execute("INSERT INTO banks (name, spec, version, updated, epoch) VALUES (?, ?, 0, 0, ?)",
                             (spec.name, json.dumps(asdict(spec), sort_keys=True), self._next_generation()))
        with self._lock:
            return self._write(spec.name, insert, create=True)

    def changes(self, held: Mapping[str, tuple[int, int]]) -> tuple[int, list[BankChanges]]:
        """The generation and every bank, read in one transaction (one consistent state, never a bank's old spec
        with its new hashes): for a bank `held` names as (epoch, version) that is still that bank and has lost no
        hash since that version, only the hashes added after it (`incremental`); for any other, all its hashes."""
        with self._lock:
            self._db.execute("BEGIN")
            try:
                generation = int(self._db.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()[0])
                # the last write was not this code's (an older writer of the same file): every bank read whole
                trusted = self._versioned() == generation
                banks = self._db.execute("SELECT name, spec, version, epoch, removed_at FROM banks ORDER BY name").fetchall()
                out = []
                for name, spec, version, epoch, removed_at in banks:
                    since = incremental_since(held.get(name) if trusted else None, int(epoch), int(version), int(removed_at))
                    rows = self._db.execute("SELECT signal, value, content_id FROM entries WHERE bank = ? AND added > ? "
                                            "ORDER BY signal, value", (name, since)).fetchall()
                    out.append(BankChanges(BankSpec(**json.loads(spec)), int(version), int(epoch),
                                           [Entry(*row) for row in rows], incremental=since >= 0))
            finally:
                self._db.execute("COMMIT")
        return generation, out

    def put_bank(self, spec: BankSpec) -> int:
        """Create or replace `spec.name`'s spec (its hashes stay); the bank's new version."""
        with self._lock:
            return self._write(spec.name, lambda version: self._db.execute(
                "INSERT INTO banks (name, spec, version, updated, epoch) VALUES (?, ?, 0, 0, ?) ON CONFLICT (name) DO UPDATE "
                "SET spec = excluded.spec", (spec.name, json.dumps(asdict(spec), sort_keys=True), self._next_generation())),
                create=True)

    def update_bank(self, spec: BankSpec) -> int:
        """Replace an existing bank's settings, only while it has the same owner (`spec.owner`, "" = shared) when
        written: BankNotFoundError otherwise (a bank deleted meanwhile stays deleted, one re-created for
        another owner keeps its owner); the bank's new version."""
        with self._lock:
            return self._write(spec.name, lambda version: self._db.execute(
                "UPDATE banks SET spec = ? WHERE name = ?", (json.dumps(asdict(spec), sort_keys=True), spec.name)),
                owner=spec.owner)

    def delete_bank(self, name: str, *, owner: str | None = None) -> None:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._check_owner(name, owner)
                if not self._db.execute("DELETE FROM banks WHERE name = ?", (name,)).rowcount:
                    raise BankNotFoundError(f"bank {name!r} does not exist")
                self._db.execute("DELETE FROM entries WHERE bank = ?", (name,))
                self._stamp()
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def add(self, bank: str, entries: Sequence[Entry], *, owner: str | None = None) -> int:
        """Add hashes to `bank` (one already there keeps its content id: the first report wins); its new version
        (unchanged when `entries` is empty)."""
        with self._lock:
            if not entries:
                return self._version(bank, owner)
            return self._write(bank, lambda version: self._db.executemany(
                "INSERT OR IGNORE INTO entries (bank, signal, value, content_id, added) VALUES (?, ?, ?, ?, ?)",
                [(bank, e.signal, e.value, e.content_id, version) for e in entries]), owner=owner)

    def remove(self, bank: str, entries: Sequence[Entry], *, owner: str | None = None) -> tuple[int, int]:
        """Remove hashes from `bank` (by signal and value); how many went and its new version."""
        removed = 0

        def change(version: int) -> None:
            nonlocal removed
            for e in entries:
                removed += self._db.execute("DELETE FROM entries WHERE bank = ? AND signal = ? AND value = ?",
                                            (bank, e.signal, e.value)).rowcount
            if removed:  # readers holding the bank must build it whole again
                self._db.execute("UPDATE banks SET removed_at = ? WHERE name = ?", (version, bank))
        with self._lock:
            if not entries:
                return 0, self._version(bank, owner)
            version = self._write(bank, change, owner=owner)
        return removed, version

    def remove_content(self, bank: str, content_ids: Sequence[str], *, owner: str | None = None) -> tuple[int, int]:
        """Remove every hash of `bank` banked under one of `content_ids` (HMA removes banked content by its
        id); how many went and the bank's new version."""
        removed = 0

        def change(version: int) -> None:
            nonlocal removed
            for content_id in dict.fromkeys(content_ids):
                removed += self._db.execute("DELETE FROM entries WHERE bank = ? AND content_id = ?",
                                            (bank, content_id)).rowcount
            if removed:
                self._db.execute("UPDATE banks SET removed_at = ? WHERE name = ?", (version, bank))
        with self._lock:
            if not content_ids:
                return 0, self._version(bank, owner)
            version = self._write(bank, change, owner=owner)
        return removed, version

    def bank(self, name: str) -> tuple[BankSpec, int] | None:
        """One bank's spec and version; None when there is none."""
        with self._lock:
            row = self._db.execute("SELECT spec, version FROM banks WHERE name = ?", (name,)).fetchone()
        return None if row is None else (BankSpec(**json.loads(row[0])), int(row[1]))

    def counts(self, bank: str) -> dict[str, int]:
        """How many hashes of each signal type `bank` holds."""
        with self._lock:
            rows = self._db.execute("SELECT signal, COUNT(*) FROM entries WHERE bank = ? GROUP BY signal",
                                    (bank,)).fetchall()
        return {signal: int(count) for signal, count in rows}

    def banks(self) -> list[tuple[BankSpec, int]]:
        """Every bank's spec and version, by name."""
        with self._lock:
            rows = self._db.execute("SELECT spec, version FROM banks ORDER BY name").fetchall()
        return [(BankSpec(**json.loads(spec)), int(version)) for spec, version in rows]

    def entries(self, bank: str) -> list[Entry]:
        with self._lock:
            rows = self._db.execute("SELECT signal, value, content_id FROM entries WHERE bank = ? ORDER BY signal, value",
                                    (bank,)).fetchall()
        return [Entry(signal, value, content_id) for signal, value, content_id in rows]

    def generation(self) -> int:
        """Raised by every change: a reader reloads when it differs from what it loaded."""
        with self._lock:
            return int(self._db.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _check_owner(self, bank: str, owner: str | None) -> None:
        """Inside a transaction: BankNotFoundError unless `bank` exists and (with `owner`) is that owner's."""
        row = self._db.execute("SELECT spec FROM banks WHERE name = ?", (bank,)).fetchone()
        if row is None or (owner is not None and json.loads(row[0]).get("owner", "") != owner):
            raise BankNotFoundError(f"bank {bank!r} does not exist; create it first")

    def _version(self, bank: str, owner: str | None) -> int:
        """The bank's version (a change with nothing to change raises none), checking it exists (and its owner)."""
        self._check_owner(bank, owner)
        return int(self._db.execute("SELECT version FROM banks WHERE name = ?", (bank,)).fetchone()[0])

    def _versioned(self) -> int:
        """The generation the last write of this code made (-1: none since the file was upgraded)."""
        row = self._db.execute("SELECT value FROM meta WHERE key = 'versioned'").fetchone()
        return int(row[0]) if row else -1

    def _stamp(self) -> None:
        """Inside a write: raise the generation and note that this code made it. When the generation moved since
        this code last wrote (a writer from before the versioned entries changed the file: hashes without their
        `added` version, removals without `removed_at`), every bank gets a new epoch first, so each reader
        builds every bank whole once instead of trusting those fields."""
        generation = int(self._db.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()[0])
        if self._versioned() != generation:
            self._db.execute("UPDATE banks SET epoch = ?", (generation + 1,))
        self._db.execute("UPDATE meta SET value = ? WHERE key = 'generation'", (generation + 1,))
        self._db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('versioned', ?)", (generation + 1,))

    def _next_generation(self) -> int:
        """Inside a write: the generation this write makes (a new bank's epoch)."""
        return int(self._db.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()[0]) + 1

    def _write(self, bank: str, change: Callable[[int], object], *, create: bool = False, owner: str | None = None) -> int:
        """`change(new version)` in one write transaction with the owner check (unless creating), the bank's
        version and the store's generation raised; the bank's new version."""
        self._db.execute("BEGIN IMMEDIATE")
        try:
            if not create:
                self._check_owner(bank, owner)
            row = self._db.execute("SELECT version FROM banks WHERE name = ?", (bank,)).fetchone()
            version = (int(row[0]) if row else 0) + 1
            change(version)
            self._db.execute("UPDATE banks SET version = ?, updated = ? WHERE name = ?", (version, self._clock(), bank))
            self._stamp()
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")
        return version


def incremental_since(held: tuple[int, int] | None, epoch: int, version: int, removed_at: int) -> int:
    """The bank version after which a reader holding `held` = (epoch, version) of a bank needs only the hashes
    added since, or -1 when it needs them all: it holds none, another bank of that name (another epoch), a
    version newer than the store's, or one older than the bank's last removal.

    Example::

        >>> incremental_since((3, 5), 3, 8, 2), incremental_since((3, 5), 3, 8, 6), incremental_since((2, 5), 3, 8, 0)
        (5, -1, -1)
    """
    if held is None or held[0] != epoch or not removed_at <= held[1] <= version:
        return -1
    return held[1]


@dataclass(frozen=True)
class BankChanges:
    """One bank as `BankRepository.changes` reads it: its spec, version and epoch, and its hashes: all of them,
    or (`incremental`) those added after the version the reader holds."""

    spec: BankSpec
    version: int
    epoch: int
    entries: list[Entry]
    incremental: bool = False


#: A loaded bank takes hashes added since its last full build as a small second layer (no rebuild of the
#: large one) until that layer holds this many; the reload after that builds the bank whole again.
MAX_DELTA = 50_000


@dataclass(frozen=True)
class BankIndexes:
    """One set of a bank's hashes, ready to search: PDQ and text SimHash indexes, exact hashes (value -> content id)."""

    pdq: HammingIndex
    text: HammingIndex
    exact: dict[tuple[str, str], str]

    @classmethod
    def of(cls, entries: Sequence[Entry]) -> BankIndexes:
        return cls(_index(entries, "pdq"), _index(entries, "text_simhash"),
                   {(e.signal, e.value): e.content_id or e.value for e in entries if e.signal in ("md5", "sha256", "text_sha256")})


@dataclass(frozen=True)
class LoadedBank:
    """One bank, ready to search: its hashes as of its last full build (`base`) and those added since
    (`delta`, at most MAX_DELTA, indexed on their own), searched as one (`pdq`, `text`, `exact`)."""

    spec: BankSpec
    version: int
    base: BankIndexes
    epoch: int = 0
    delta: tuple[Entry, ...] = ()
    pdq: IndexLayers = field(init=False, repr=False)
    text: IndexLayers = field(init=False, repr=False)
    exact: Mapping[tuple[str, str], str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        added = BankIndexes.of(self.delta) if self.delta else None
        layers = (self.base, added) if added is not None else (self.base,)
        object.__setattr__(self, "pdq", IndexLayers(tuple(layer.pdq for layer in layers)))
        object.__setattr__(self, "text", IndexLayers(tuple(layer.text for layer in layers)))
        object.__setattr__(self, "exact", ChainMap(added.exact, self.base.exact) if added is not None else self.base.exact)

    @classmethod
    def built(cls, spec: BankSpec, version: int, entries: Sequence[Entry], epoch: int = 0) -> LoadedBank:
        """A bank built whole from all its hashes."""
        return cls(spec, version, BankIndexes.of(entries), epoch)

    def extended(self, spec: BankSpec, version: int, added: Sequence[Entry]) -> LoadedBank:
        """This bank at `version` with `spec`, holding `added` besides (hashes added since this version): the
        base is kept as it is; the added hashes join the delta layer, which alone is indexed anew."""
        return LoadedBank(spec, version, self.base, self.epoch, self.delta + tuple(added))

    @property
    def size(self) -> int:
        return len(self.pdq) + len(self.text) + len(self.exact)


@dataclass(frozen=True)
class LoadedBanks:
    """Every bank of a store at one generation (immutable: a reload builds a new one)."""

    generation: int
    banks: tuple[LoadedBank, ...]
    loaded_at: float
    #: Hashes this load read from the store (all of each bank built whole, only the added ones of the others).
    read: int = 0

    @classmethod
    def load(cls, store: BankRepository, clock: Callable[[], float] = time.time, *,
             previous: LoadedBanks | None = None) -> LoadedBanks:
        """Every bank of `store`. With `previous` (what is loaded now), a bank that only gained hashes since is
        extended with them (its large indexes kept; `LoadedBank.extended`) while its delta stays within
        MAX_DELTA; any other bank is built whole."""
        held = {bank.spec.name: bank for bank in previous.banks if len(bank.delta) < MAX_DELTA} if previous else {}
        generation, banks = store.changes({name: (bank.epoch, bank.version) for name, bank in held.items()})
        loaded = []
        for change in banks:
            old = held.get(change.spec.name)
            if change.incremental and old is not None and change.version == old.version and change.spec == old.spec:
                loaded.append(old)  # unchanged: its indexes as they are
            elif change.incremental and old is not None:
                loaded.append(old.extended(change.spec, change.version, change.entries))
            else:
                loaded.append(LoadedBank.built(change.spec, change.version, change.entries, change.epoch))
        return cls(generation, tuple(loaded), clock(), sum(len(change.entries) for change in banks))

    def visible_to(self, tenant: str) -> list[LoadedBank]:
        return [bank for bank in self.banks if bank.spec.visible_to(tenant)]


def _index(entries: Sequence[Entry], signal: str) -> HammingIndex:
    chosen = [e for e in entries if e.signal == signal]
    width = SIGNAL_TYPES[signal] // 2
    rows = np.frombuffer(bytes.fromhex("".join(e.value for e in chosen)), dtype=np.uint8).reshape(len(chosen), width)
    return HammingIndex.build(rows, [e.content_id or e.value for e in chosen])
