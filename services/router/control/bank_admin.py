"""The BankAdmin gRPC servicer (`protos/auditmesh/v1/admin.proto`): banks of known content managed
through the admin API. A thin adapter over services/match/commands.py and the bank store the match
service reads: it authenticates the admin key as PolicyAdmin does (`admin_call`), checks that the key
covers the bank's owner (a shared bank needs a global key), validates sizes, runs the store work in a
worker thread and converts the results. Served on the router's admin port only, beside PolicyAdmin.

A scoped key never learns about banks outside its tenants: they are not listed, and naming one answers
NOT_FOUND exactly as a bank that does not exist. Bank names are one namespace, so a bank made with a scoped
key is named `<tenant>-...` (it cannot take or probe another tenant's names). Every change is written only
if the bank still has the owner checked (the store checks it in the write's transaction): a bank deleted
and re-created for another tenant meanwhile is NOT_FOUND, never changed.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Iterable, TypeVar

import grpc
import psycopg
from auditmesh.v1 import admin_pb2 as apb
from auditmesh.v1 import admin_pb2_grpc as apb_grpc

from services.common.auth_guard import AuthGuard
from services.common.auth_throttle import AuthThrottle
from services.common.errors import (AlreadyExistsError, FailedPreconditionError, InvalidRequestError, LimitExceededError,
                                    NotFoundError, UnavailableError)
from services.match.banks import BankError, BankExistsError, BankNotFoundError, BankRepository, BankSpec, Entry
from services.match.commands import (add_content, create_bank, delete_bank, export_hashes, image_entries, import_hashes,
                                     remove_content)
from services.match.formats import FORMATS, text_entries
from services.router.control.admin import admin_call
from services.router.control.admin_auth import AdminAuth, AdminKey
from services.router.control.hashed_images import check_images
from services.router.control.image_labels import REVIEWED_PREFIX
from services.router.control.postgres import PostgresUnavailableError

log = logging.getLogger(__name__)
T = TypeVar("T")
BANK_ADMIN_SERVICE_NAME = "auditmesh.v1.BankAdmin"
#: Contents of one AddContent or RemoveContent call at most.
MAX_CONTENTS = 1000
#: Hashes one ExportHashes answers at most (about 30 MB of csv): a larger bank is exported where its store is.
MAX_EXPORT_HASHES = 500_000
#: Settings fields a request may set (BankSettings), in BankSpec's names.
_OPTIONAL = ("category", "severity", "action", "pdq_distance", "text_distance", "enabled_ratio", "min_pdq_quality",
             "negative", "description")


class BankAdminServicer(apb_grpc.BankAdminServicer):
    def __init__(self, store: BankRepository | None, auth: AdminAuth, *, guard: AuthGuard | None = None) -> None:
        #: The bank store the match service reads; None: every call answers FAILED_PRECONDITION.
        self.store = store
        self.auth = auth
        self.guard = guard or AuthGuard(AuthThrottle(), surface="admin")

    async def _run(self, context: grpc.aio.ServicerContext, work: Callable[[AdminKey, BankRepository], T]) -> T:
        def guarded(key: AdminKey) -> T:
            if self.store is None:
                raise FailedPreconditionError("this router has no bank store (lifecycle.banks_path): manage banks "
                                              "where the match service's store is (docs/matching.md)")
            try:
                return work(key, self.store)
            except BankNotFoundError as error:
                raise NotFoundError(str(error)) from None
            except BankExistsError as error:
                raise AlreadyExistsError(str(error)) from None
            except BankError as error:
                raise InvalidRequestError(str(error)) from None
            except (PostgresUnavailableError, psycopg.OperationalError) as error:  # down, failing over, a lock held
                raise UnavailableError(f"the bank store is unavailable, retry: {type(error).__name__}") from None
        return await admin_call(context, self.guard, self.auth, None, guarded)

    def _owned(self, key: AdminKey, store: BankRepository, name: str) -> tuple[BankSpec, int]:
        """The bank's spec and version, when `key` may manage it; NOT_FOUND otherwise (whether or not it exists)."""
        found = store.bank(name)
        if found is None or not key.covers(found[0].owner):
            raise NotFoundError(f"bank {name!r} does not exist, or is not one admin key {key.name!r} manages")
        return found

    async def CreateBank(self, request: apb.CreateBankRequest, context: grpc.aio.ServicerContext) -> apb.BankInfo:
        def work(key: AdminKey, store: BankRepository) -> apb.BankInfo:
            settings = request.settings
            spec = BankSpec(request.name, owner=settings.owner, shared=settings.shared, **_set_fields(settings))
            self.auth.require(key, spec.owner)
            if spec.name.startswith(REVIEWED_PREFIX):
                raise InvalidRequestError(f"name: names starting with {REVIEWED_PREFIX!r} are kept for the banks reviewers' "
                                          f"image labels fill (SubmitLabels), got {spec.name!r}")
            if not key.is_global and not spec.name.startswith(f"{spec.owner}-"):
                raise InvalidRequestError(f"name: a bank made with a tenant-scoped key is named '{spec.owner}-...' "
                                          f"(bank names are one namespace shared by every tenant), got {spec.name!r}")
            version = create_bank(store, spec)["version"]
            return _info(store, spec, version)
        return await self._run(context, work)

    async def UpdateBank(self, request: apb.UpdateBankRequest, context: grpc.aio.ServicerContext) -> apb.BankInfo:
        def work(key: AdminKey, store: BankRepository) -> apb.BankInfo:
            spec, _ = self._owned(key, store, request.name)
            settings = request.settings
            if (settings.owner and settings.owner != spec.owner) or (settings.shared and not spec.shared):
                raise InvalidRequestError("settings.owner: a bank's owner cannot change (its hashes would reach another "
                                          "tenant's content): delete it and create it again")
            fields = {**{name: getattr(spec, name) for name in _OPTIONAL}, **_set_fields(settings)}
            updated = BankSpec(spec.name, owner=spec.owner, shared=spec.shared, **fields)
            return _info(store, updated, store.update_bank(updated))
        return await self._run(context, work)

    async def ListBanks(self, request: apb.ListBanksRequest, context: grpc.aio.ServicerContext) -> apb.ListBanksResponse:
        def work(key: AdminKey, store: BankRepository) -> apb.ListBanksResponse:
            return apb.ListBanksResponse(banks=[_info(store, spec, version) for spec, version in store.banks()
                                                if key.covers(spec.owner)])
        return await self._run(context, work)

    async def DeleteBank(self, request: apb.DeleteBankRequest, context: grpc.aio.ServicerContext) -> apb.DeleteBankResponse:
        def work(key: AdminKey, store: BankRepository) -> apb.DeleteBankResponse:
            spec, _ = self._owned(key, store, request.name)
            delete_bank(store, request.name, owner=spec.owner)
            log.info("bank %s deleted by admin key %s", request.name, key.name)
            return apb.DeleteBankResponse(name=request.name)
        return await self._run(context, work)

    async def AddContent(self, request: apb.AddContentRequest, context: grpc.aio.ServicerContext) -> apb.BankChange:
        def work(key: AdminKey, store: BankRepository) -> apb.BankChange:
            spec, _ = self._owned(key, store, request.bank)
            entries = _entries(request.contents)
            done = add_content(store, request.bank, entries, owner=spec.owner)
            return apb.BankChange(bank=request.bank, hashes=done["added"], version=done["version"])
        return await self._run(context, work)

    async def RemoveContent(self, request: apb.RemoveContentRequest, context: grpc.aio.ServicerContext) -> apb.BankChange:
        def work(key: AdminKey, store: BankRepository) -> apb.BankChange:
            spec, _ = self._owned(key, store, request.bank)
            if len(request.content_ids) > MAX_CONTENTS:
                raise LimitExceededError(f"content_ids: at most {MAX_CONTENTS} per call, got {len(request.content_ids)}")
            if not request.content_ids and not request.contents:
                raise InvalidRequestError("content_ids, contents: name what to remove")
            done = remove_content(store, request.bank, entries=_entries(request.contents),
                                  content_ids=list(request.content_ids), owner=spec.owner)
            return apb.BankChange(bank=request.bank, hashes=done["removed"], version=done["version"])
        return await self._run(context, work)

    async def ImportHashes(self, request: apb.ImportHashesRequest, context: grpc.aio.ServicerContext) -> apb.BankChange:
        def work(key: AdminKey, store: BankRepository) -> apb.BankChange:
            spec, _ = self._owned(key, store, request.bank)
            try:
                data = request.data.decode("utf-8")
            except UnicodeDecodeError as error:
                raise InvalidRequestError(f"data: not UTF-8 ({error.reason} at byte {error.start})") from None
            done = import_hashes(store, request.bank, data, _format(request.format), owner=spec.owner)
            return apb.BankChange(bank=request.bank, hashes=done["rows"], version=done["version"])
        return await self._run(context, work)

    async def ExportHashes(self, request: apb.ExportHashesRequest,
                           context: grpc.aio.ServicerContext) -> apb.ExportHashesResponse:
        def work(key: AdminKey, store: BankRepository) -> apb.ExportHashesResponse:
            spec, version = self._owned(key, store, request.bank)
            size = sum(store.counts(spec.name).values())
            if size > MAX_EXPORT_HASHES:
                raise FailedPreconditionError(f"bank {spec.name!r} holds {size} hashes, more than one ExportHashes answers "
                                              f"({MAX_EXPORT_HASHES}): export it with `auditmesh banks export` where its "
                                              "store is")
            data = export_hashes(store, request.bank, _format(request.format))
            if self._owned(key, store, request.bank)[0].owner != spec.owner:  # re-created for another owner meanwhile
                raise NotFoundError(f"bank {request.bank!r} does not exist, or is not one admin key {key.name!r} manages")
            return apb.ExportHashesResponse(bank=request.bank, version=version, hashes=size, data=data.encode("utf-8"))
        return await self._run(context, work)


def _set_fields(settings: apb.BankSettings) -> dict[str, Any]:
    """The optional settings a request set, in BankSpec's names."""
    return {name: getattr(settings, name) for name in _OPTIONAL if settings.HasField(name)}


def _format(value: str) -> str:
    fmt = value or "csv"
    if fmt not in FORMATS:
        raise InvalidRequestError(f"format: one of {', '.join(FORMATS)}, got {value!r}")
    return fmt


def _entries(contents: Iterable[apb.BankContent]) -> list[Entry]:
    """The hashes of AddContent's / RemoveContent's contents; INVALID_ARGUMENT naming `contents[i]`."""
    items = list(contents)
    if len(items) > MAX_CONTENTS:
        raise LimitExceededError(f"contents: at most {MAX_CONTENTS} per call, got {len(items)}")
    check_images([(f"contents[{index}].image", item.image) for index, item in enumerate(items)
                  if item.WhichOneof("content") == "image"])
    entries: list[Entry] = []
    for index, item in enumerate(items):
        kind = item.WhichOneof("content")
        try:
            if kind == "image":
                entries += image_entries(item.image, item.content_id)
            elif kind == "text":
                entries += text_entries(item.text, item.content_id)
            elif kind == "hash":
                entries.append(Entry(item.hash.signal_type, item.hash.value.strip().lower(), item.content_id))
            else:
                raise BankError("set one of image, text or hash")
        except ValueError as error:  # BankError, or an image that does not decode
            raise InvalidRequestError(f"contents[{index}].{kind or 'content'}: {error}") from None
    return entries


def _info(store: BankRepository, spec: BankSpec, version: int) -> apb.BankInfo:
    settings = apb.BankSettings(owner=spec.owner, shared=spec.shared, category=spec.category, severity=spec.severity,
                                action=spec.action, pdq_distance=spec.pdq_distance, text_distance=spec.text_distance,
                                enabled_ratio=spec.enabled_ratio, min_pdq_quality=spec.min_pdq_quality,
                                negative=spec.negative, description=spec.description)
    return apb.BankInfo(name=spec.name, settings=settings, version=version, hashes=store.counts(spec.name))
