"""Log records carry the request id and the trace id when known (text and JSON formats), and only then."""

from __future__ import annotations

import io
import json
import logging

from services.common.logs import ContextFilter, JsonFormatter, TextFormatter, request_scope
from services.common.tracing.telemetry import tracer
from tests.stubs import InMemoryTracing


def capture(formatter: logging.Formatter) -> tuple[logging.Logger, io.StringIO]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(ContextFilter())
    handler.setFormatter(formatter)
    logger = logging.getLogger(f"test-logs-{id(stream)}")
    logger.handlers[:] = [handler]
    logger.propagate = False
    logger.setLevel(logging.INFO)
    return logger, stream


def test_json_lines_carry_request_and_trace_ids() -> None:
    logger, stream = capture(JsonFormatter("router-bulk"))
    logger.info("outside")
    with InMemoryTracing(), tracer().start_as_current_span("call") as span, request_scope("req-7") as request_id:
        logger.info("moderated", extra={"tenant": "acme", "decision": "allow"})
    first, second = (json.loads(line) for line in stream.getvalue().splitlines())
    assert "request_id" not in first and "trace_id" not in first
    assert first["service"] == second["service"] == "router-bulk"
    assert request_id == "req-7" and second["request_id"] == "req-7" and second["tenant"] == "acme"
    assert second["trace_id"] == format(span.get_span_context().trace_id, "032x")


def test_text_lines_append_the_ids_and_a_missing_request_id_is_generated() -> None:
    logger, stream = capture(TextFormatter("router"))
    with request_scope() as request_id:
        logger.info("rejected")
    line = stream.getvalue().strip()
    assert len(request_id) == 16 and line.endswith(f"rejected request_id={request_id}")
    assert " router INFO " in line
