"""Structured logs: one JSON object per line on stdout (ts, level, msg, then fields), or text.

Log lines are read by machines (Loki, Elasticsearch) more often than by people during an
incident, so every fact goes into its own field instead of being formatted into the
message: `log.warning("kind forbidden", extra=fields(group="apps", kind="Deployment"))`.
The text format prints the same fields as `key=value` for a terminal.
"""

from __future__ import annotations

import logging
import sys
from datetime import UTC, datetime
from typing import Any, TextIO

import orjson

from watcher.terminal import stderr_lines

ROOT = "stalewatch"
_FIELDS = "stalewatch_fields"


def fields(**values: Any) -> dict[str, Any]:
    """The `extra=` argument that attaches structured fields to one log call."""
    return {_FIELDS: values}


def get_logger(name: str) -> logging.Logger:
    """A logger under the stalewatch root, e.g. get_logger("kube") -> "stalewatch.kube"."""
    return logging.getLogger(f"{ROOT}.{name}")


def _timestamp(record: logging.LogRecord) -> str:
    moment = datetime.fromtimestamp(record.created, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _fields_of(record: logging.LogRecord) -> dict[str, Any]:
    found = getattr(record, _FIELDS, None)
    return found if isinstance(found, dict) else {}


class JsonFormatter(logging.Formatter):
    """`{"ts": ..., "level": "info", "msg": ..., "logger": ..., **fields}`; never raises on odd values."""

    def format(self, record: logging.LogRecord) -> str:
        document: dict[str, Any] = {
            "ts": _timestamp(record),
            "level": record.levelname.lower(),
            "msg": record.getMessage(),
            "logger": record.name,
        }
        for key, value in _fields_of(record).items():
            document.setdefault(key, value)
        if record.exc_info:
            document["error"] = self.formatException(record.exc_info)
        return orjson.dumps(document, default=str).decode()


class TextFormatter(logging.Formatter):
    """`ts LEVEL msg key=value ...` for people reading a terminal: one printable line per
    record (names and messages in it come from the cluster), a traceback indented under it."""

    def format(self, record: logging.LogRecord) -> str:
        pairs = " ".join(f"{key}={_text_value(value)}" for key, value in _fields_of(record).items())
        line = f"{_timestamp(record)} {record.levelname:<7} {record.getMessage()}"
        if pairs:
            line = f"{line} {pairs}"
        if record.exc_info:
            line = f"{line}\n{self.formatException(record.exc_info)}"
        return "\n".join(stderr_lines(line))


def _text_value(value: Any) -> str:
    text = value if isinstance(value, str) else orjson.dumps(value, default=str).decode()
    return text if text and " " not in text and '"' not in text else orjson.dumps(text).decode()


def setup_logging(*, level: str = "info", fmt: str = "json", stream: TextIO | None = None) -> None:
    """Route the stalewatch loggers (and warnings from libraries) to `stream`, replacing any
    handler a previous call installed, so tests and re-runs do not print every line twice."""
    handler = logging.StreamHandler(stream or sys.stdout)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        if getattr(old, "_stalewatch", False):
            root.removeHandler(old)
    handler._stalewatch = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    logging.getLogger(ROOT).setLevel(level.upper())
