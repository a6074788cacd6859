"""What the kernel's helpers (``run_sql``, ``list_files``) print back, read as untrusted text.

The helpers run inside the episode's kernel, where the agent can replace them: a
cell may rebind ``__analyst_sql__`` to print any JSON it likes. A reply is therefore
taken only when it has the shape the real helper prints; anything else is the
tool's ordinary "could not" answer, never an exception inside the server.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ValidationError


class SqlRows(BaseModel):
    """A query the helper ran: what ``render_table`` shows and the tool's data carries."""

    ok: Literal[True]
    engine: str
    columns: list[str]
    rows: list[list[Any]]
    truncated: bool


class SqlFailure(BaseModel):
    """A query the engine refused, with its reason."""

    ok: Literal[False]
    error: str


class FileEntry(BaseModel):
    name: str
    size_bytes: int


class FileList(BaseModel):
    ok: Literal[True]
    files: list[FileEntry]


def read_reply(stdout: str, *shapes: type[BaseModel]) -> BaseModel | None:
    """The last JSON line of ``stdout`` that fits one of ``shapes`` (tried in order), if any."""
    for line in reversed(stdout.strip().splitlines()):
        try:
            reply = json.loads(line)
        except ValueError:
            continue
        for shape in shapes:
            try:
                return shape.model_validate(reply)
            except ValidationError:
                continue
    return None
