"""Logging set-up shared by every service: plain text by default, JSON lines with `--log-format json`.

Never log raw content (texts, image bytes): only ids, sizes, decisions and timings.
"""

from __future__ import annotations

import json
import logging
import sys
import time


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, msg, plus any `extra={...}` fields."""

    _standard = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}

    def format(self, record: logging.LogRecord) -> str:
        entry = {"ts": round(record.created, 6), "level": record.levelname.lower(), "logger": record.name,
                 "msg": record.getMessage()}
        entry.update({k: v for k, v in vars(record).items() if k not in self._standard})
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str, ensure_ascii=False)


def configure_logging(service: str, level: str = "info", fmt: str = "text") -> None:
    """Route all logging to stderr in the chosen format, prefixed with the service name."""
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        formatter = logging.Formatter(f"%(asctime)s.%(msecs)03dZ {service} %(levelname)s %(name)s: %(message)s", "%Y-%m-%dT%H:%M:%S")
        formatter.converter = time.gmtime
        handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
