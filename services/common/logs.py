"""Logging set-up shared by every service: plain text by default, JSON lines with `--log-format json`.

Every record logged while a request is being handled carries its `request_id` (set with
`request_scope`) and, when the request is traced, the `trace_id` of the active span, so a log line
leads to the trace and back (with ratio sampling, a request the router did not sample has no trace
context and its lines carry the `request_id` only). Each line names its service (`configure_logging`).
Never log raw content (texts, image bytes): only ids, sizes, decisions and timings.

Example::

    with request_scope(request.request_id):
        log.info("moderated", extra={"tenant": tenant.id, "decision": "allow"})
    # {"ts": ..., "service": "router", "msg": "moderated", "tenant": "acme", "decision": "allow", "request_id": "r-1", "trace_id": "4bf9..."}
"""

from __future__ import annotations

import json
import logging
import sys
import time
import uuid
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Iterator

from services.common.tracing.spans import current_trace_id

request_id_var: ContextVar[str] = ContextVar("auditmesh_request_id", default="")


@contextmanager
def request_scope(request_id: str = "") -> Iterator[str]:
    """Tag log records inside the block with `request_id` (a fresh one when empty); yields the id."""
    request_id = request_id or uuid.uuid4().hex[:16]
    token = request_id_var.set(request_id)
    try:
        yield request_id
    finally:
        request_id_var.reset(token)


class ContextFilter(logging.Filter):
    """Adds `request_id` and `trace_id` to a record when they are known (never empty fields)."""

    def filter(self, record: logging.LogRecord) -> bool:
        request_id = request_id_var.get()
        if request_id and not hasattr(record, "request_id"):
            record.request_id = request_id
        trace_id = current_trace_id()
        if trace_id and not hasattr(record, "trace_id"):
            record.trace_id = trace_id
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, service, level, logger, msg, plus any `extra={...}` fields."""

    _standard = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}

    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service

    def format(self, record: logging.LogRecord) -> str:
        entry = {"ts": round(record.created, 6), "service": self.service, "level": record.levelname.lower(),
                 "logger": record.name, "msg": record.getMessage()}
        entry.update({k: v for k, v in vars(record).items() if k not in self._standard})
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    """`<time> <service> <LEVEL> <logger>: <message>`, then ` request_id=... trace_id=...` when known."""

    def __init__(self, service: str) -> None:
        super().__init__(f"%(asctime)s.%(msecs)03dZ {service} %(levelname)s %(name)s: %(message)s", "%Y-%m-%dT%H:%M:%S")
        self.converter = time.gmtime

    def formatMessage(self, record: logging.LogRecord) -> str:  # before any traceback is appended
        text = super().formatMessage(record)
        ids = " ".join(f"{key}={getattr(record, key)}" for key in ("request_id", "trace_id") if hasattr(record, key))
        return f"{text} {ids}" if ids else text


def configure_logging(service: str, level: str = "info", fmt: str = "text") -> None:
    """Route all logging to stderr in the chosen format, each line naming `service` (a router lane's
    process is "router-<lane>"). Calling it again replaces the earlier set-up."""
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(ContextFilter())
    handler.setFormatter(JsonFormatter(service) if fmt == "json" else TextFormatter(service))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
