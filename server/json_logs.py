"""JSON log lines (``ANALYST_ENV_LOG_FORMAT=json``) for log collectors that parse fields.

One object per line on stderr: ``ts`` (UTC, ISO 8601), ``level``, ``logger``,
``message`` and, for uvicorn's access log, ``client``, ``method``, ``path`` and
``status``; ``exc`` holds a traceback when there is one. The token-redacting filter
runs before formatting, so a ``?token=`` value is not written in either format.
"""

from __future__ import annotations

import copy
import datetime
import json
import logging
from typing import Any

LOG_FORMATS = ("text", "json")


class JsonFormatter(logging.Formatter):
    """Formats a record as one JSON object (never raises for odd arguments)."""

    def format(self, record: logging.LogRecord) -> str:
        ts = datetime.datetime.fromtimestamp(record.created, datetime.UTC)
        line: dict[str, Any] = {
            "ts": ts.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        args = record.args
        if record.name == "uvicorn.access" and isinstance(args, tuple) and len(args) == 5:
            client, method, path, _, status = args
            line.update(client=client, method=method, path=path, status=status)
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


def uvicorn_log_config(log_format: str) -> dict[str, Any] | None:
    """uvicorn's ``log_config`` for ``log_format`` (None: uvicorn's own text format).

    JSON covers uvicorn's loggers and, through the root logger, the server's own.
    """
    if log_format == "text":
        return None
    if log_format != "json":
        raise ValueError(f"log format must be one of {LOG_FORMATS}, got {log_format!r}")
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    json_formatter = {"()": f"{__name__}.JsonFormatter"}
    config["formatters"] = {"default": json_formatter, "access": json_formatter}
    config["handlers"]["access"]["stream"] = "ext://sys.stderr"
    config["root"] = {"handlers": ["default"], "level": "INFO"}
    return config
