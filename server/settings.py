"""Server settings, read once from ``ANALYST_ENV_*`` environment variables.

The CLI flags of ``analyst-env serve`` override the same fields, so the
Dockerfile, a Space's variables and a terminal all configure one object.
"""

from __future__ import annotations

import os

from pydantic import BaseModel, Field


class Settings(BaseModel):
    """Everything an operator can configure. Units are in the names."""

    dataset: str = Field(
        default="starter",
        description="Dataset(s) to serve: a shipped set name or FORMAT:PATH; comma-separated for several",
    )
    backend: str = Field(default="local", description="Sandbox backend")
    max_sessions: int = Field(default=64, ge=1, description="Concurrent episodes (WebSocket sessions)")
    session_idle_timeout_s: float = Field(
        default=900.0, gt=0, description="Idle sessions without a WebSocket are reaped after this"
    )
    cell_timeout_s: float = Field(default=30.0, gt=0, description="Per-cell wall-clock limit")
    shell_timeout_s: float = Field(default=60.0, gt=0, description="Per-shell-command limit")
    output_limit_chars: int = Field(default=20_000, ge=200, description="Tool output is cut here")
    sql_max_rows: int = Field(default=50, ge=1, description="Rows shown by run_sql")
    memory_limit_mb: int = Field(default=4096, ge=256, description="Address-space limit per kernel")
    token: str | None = Field(default=None, description="Bearer token required on every route but /health")

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None, **overrides: object) -> Settings:
        """Settings from ``ANALYST_ENV_<FIELD>`` variables, then ``overrides`` (ignoring None)."""
        environ = os.environ if environ is None else environ
        values: dict[str, object] = {}
        for name in cls.model_fields:
            raw = environ.get(f"ANALYST_ENV_{name.upper()}")
            if raw not in (None, ""):
                values[name] = raw
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls.model_validate(values)
