"""The options ``reset`` accepts, validated instead of silently dropped.

OpenEnv's WebSocket server passes every key of a reset frame to ``reset`` as a
keyword argument. A typo such as ``taskid`` must fail loudly, not serve a
random task, so the options are a strict model. Gymnasium-style callers may
nest the task choice under ``options``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError


class ResetOptions(BaseModel):
    """How to choose the episode's task and seed its kernel."""

    model_config = ConfigDict(extra="forbid")

    seed: int | None = Field(
        default=None, ge=0, description="Seeds the kernel's RNGs and the task draw"
    )
    episode_id: str | None = Field(
        default=None, max_length=255, description="Id to give the episode"
    )
    task_id: str | None = Field(default=None, description="Serve exactly this task")
    split: str | None = Field(default=None, description="Choose within this split")
    index: int | None = Field(default=None, ge=0, description="Position within the split")
    environment: str | None = Field(
        default=None,
        max_length=63,
        description="Run in this sandbox environment instead of the task's image",
    )

    @classmethod
    def parse(cls, *, seed: Any, episode_id: Any, options: dict[str, Any]) -> ResetOptions:
        """Validate reset kwargs; raise ``ValueError`` naming what was wrong and what is
        accepted."""
        merged = dict(options)
        nested = merged.pop("options", None) or {}
        if not isinstance(nested, dict):
            raise ValueError("reset option 'options' must be an object")
        merged.update(nested)
        try:
            return cls(seed=seed, episode_id=episode_id, **merged)
        except ValidationError as exc:
            problems = "; ".join(
                f"unknown option '{e['loc'][0]}'"
                if e["type"] == "extra_forbidden"
                else f"'{e['loc'][0]}': {e['msg']}"
                for e in exc.errors()
            )
            raise ValueError(
                f"invalid reset options: {problems}. Accepted: {', '.join(cls.model_fields)}."
            ) from None
