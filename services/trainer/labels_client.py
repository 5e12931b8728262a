"""Moving labelled examples between a JSONL file and a router's label store (PolicyAdmin SubmitLabels /
ExportLabels, services/router/control/label_store.py): `auditmesh labels import` and
`auditmesh classifier train --from-router`.

An example without an `"id"` is stored under a digest of its text (`sha256:` + 24 hex digits), so
importing the same file twice replaces instead of duplicating. Items go in calls of at most
`label_store.MAX_ITEMS_PER_CALL` items and about `CALL_BYTES` of text, each all or nothing; a refusal
stops the import and says how many items were stored before it.

Example::

    summary = import_labels(Path("labels.jsonl"), "acme", "127.0.0.1:8105", admin_key="...", reviewer="export-2026-12")
    examples = export_examples("acme", "127.0.0.1:8105", admin_key="...")
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Iterator, Sequence

import grpc
from auditmesh.v1 import admin_pb2 as apb
from auditmesh.v1 import admin_pb2_grpc as apb_grpc

from auditmesh.client.settings import ClientTls, blocking_channel
from services.router.control.label_store import MAX_DELETE, MAX_ITEMS_PER_CALL, MAX_PAGE
from services.trainer.examples import Example, read_examples

__all__ = ["LabelsError", "export_examples", "import_labels", "item_id_of"]

#: About this much text per SubmitLabels call (well under gRPC's message limits).
CALL_BYTES = 4 * 1024 * 1024
CALL_TIMEOUT_S = 60.0
#: gRPC message limits of the client's channel (a page of long texts is several MB).
CHANNEL_OPTIONS = [("grpc.max_send_message_length", 64 << 20), ("grpc.max_receive_message_length", 64 << 20)]


class LabelsError(RuntimeError):
    """A call failed; the message says which and what the router answered."""


def item_id_of(example: Example) -> str:
    """The example's own id, else a digest of its text.

    Example::

        >>> item_id_of(Example("hi", {"spam": 0}, "m-1")), item_id_of(Example("hi", {"spam": 0}))
        ('m-1', 'sha256:8f434346648f6b96df89dda9')
    """
    return example.item_id or "sha256:" + hashlib.sha256(example.text.encode("utf-8")).hexdigest()[:24]


def _calls(examples: Sequence[Example], reviewer: str) -> Iterator[list[apb.LabelledItem]]:
    batch: list[apb.LabelledItem] = []
    size = 0
    for example in examples:
        item = apb.LabelledItem(item_id=item_id_of(example), text=example.text, reviewer=reviewer,
                                labels={c: bool(v) for c, v in example.labels.items()})
        if batch and (len(batch) >= MAX_ITEMS_PER_CALL or size + len(example.text.encode("utf-8")) > CALL_BYTES):
            yield batch
            batch, size = [], 0
        batch.append(item)
        size += len(example.text.encode("utf-8"))
    if batch:
        yield batch


def import_labels(path: Path, tenant: str, admin: str, *, admin_key: str, reviewer: str = "",
                  tls: ClientTls | None = None) -> dict[str, Any]:
    """Store every example of the JSONL file `path` as `tenant`'s labels; a summary. ExamplesError for a bad
    file (nothing sent), LabelsError for a refused call (the items of earlier calls stay stored)."""
    examples = read_examples(path)
    added = replaced = total = stored = 0
    with blocking_channel(admin, tls, CHANNEL_OPTIONS) as channel:
        stub = apb_grpc.PolicyAdminStub(channel)
        for batch in _calls(examples, reviewer):
            try:
                answer = stub.SubmitLabels(apb.SubmitLabelsRequest(tenant=tenant, items=batch),
                                           metadata=[("x-admin-key", admin_key)], timeout=CALL_TIMEOUT_S)
            except grpc.RpcError as error:
                raise LabelsError(f"SubmitLabels after {stored} of {len(examples)} items: {error.code().name}: "
                                  f"{error.details()}") from None
            added, replaced, total = added + answer.added, replaced + answer.replaced, answer.tenant_total
            stored += len(batch)
    return {"tenant": tenant, "file": str(path), "items": len(examples), "added": added, "replaced": replaced,
            "tenant_total": total}


def delete_labels(tenant: str, item_ids: Sequence[str], admin: str, *, admin_key: str,
                  tls: ClientTls | None = None) -> dict[str, Any]:
    """Delete `tenant`'s labels of `item_ids` (DeleteLabels, at most MAX_DELETE ids a call); a summary.
    LabelsError for a refused call (the ids of earlier calls stay deleted)."""
    deleted = total = done = 0
    with blocking_channel(admin, tls, CHANNEL_OPTIONS) as channel:
        stub = apb_grpc.PolicyAdminStub(channel)
        for first in range(0, len(item_ids), MAX_DELETE):
            chunk = list(item_ids[first:first + MAX_DELETE])
            try:
                answer = stub.DeleteLabels(apb.DeleteLabelsRequest(tenant=tenant, item_ids=chunk),
                                           metadata=[("x-admin-key", admin_key)], timeout=CALL_TIMEOUT_S)
            except grpc.RpcError as error:
                raise LabelsError(f"DeleteLabels after {done} of {len(item_ids)} ids: {error.code().name}: "
                                  f"{error.details()}") from None
            deleted, total, done = deleted + answer.deleted, answer.tenant_total, done + len(chunk)
    return {"tenant": tenant, "item_ids": len(item_ids), "deleted": deleted, "tenant_total": total}


def export_examples(tenant: str, admin: str, *, admin_key: str, tls: ClientTls | None = None) -> list[Example]:
    """Every label `tenant` has in the router's store, as training examples (in item-id order)."""
    examples: list[Example] = []
    token = ""
    with blocking_channel(admin, tls, CHANNEL_OPTIONS) as channel:
        stub = apb_grpc.PolicyAdminStub(channel)
        while True:
            try:
                page = stub.ExportLabels(apb.ExportLabelsRequest(tenant=tenant, limit=MAX_PAGE, page_token=token),
                                         metadata=[("x-admin-key", admin_key)], timeout=CALL_TIMEOUT_S)
            except grpc.RpcError as error:
                raise LabelsError(f"ExportLabels after {len(examples)} items: {error.code().name}: {error.details()}") from None
            examples.extend(Example(item.text, {c: int(v) for c, v in sorted(item.labels.items())}, item.item_id)
                            for item in page.items)
            token = page.next_page_token
            if not token:
                return examples
