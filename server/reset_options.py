"""The options ``reset`` accepts, validated instead of silently dropped.

OpenEnv's WebSocket server passes every key of a reset frame to ``reset`` as a
keyword argument. A typo such as ``taskid`` must fail loudly, not serve a
random task, so the options are a strict model. Gymnasium-style callers may
nest the task choice under ``options``.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError


def _not_a_boolean(value: Any) -> Any:
    if isinstance(value, bool):  # lax pydantic reads JSON's true/false as 1/0
        raise ValueError("must be an integer, not true or false")
    return value


WholeNumber = Annotated[int, Field(ge=0), BeforeValidator(_not_a_boolean)]
"""A count or seed: what pydantic accepts as an ``int`` >= 0 (numpy integers too), less
booleans."""


class ResetOptions(BaseModel):
    """How to choose the episode's task and seed its kernel."""

    model_config = ConfigDict(extra="forbid")

    seed: WholeNumber | None = Field(
        default=None, description="Seeds the kernel's RNGs and the task draw"
    )
    episode_id: str | None = Field(
        default=None, max_length=255, description="Id to give the episode"
    )
    task_id: str | None = Field(default=None, description="Serve exactly this task")
    split: str | None = Field(default=None, description="Choose within this split")
    index: WholeNumber | None = Field(default=None, description="Position within the split")
    client_id: str | None = Field(
        default=None,
        max_length=64,
        description="Who the curriculum counts this episode for (default: the connection)",
    )
    curriculum_group: str | None = Field(
        default=None,
        max_length=64,
        description=(
            "Resets of one client_id with the same group get the same curriculum task "
            "(the rollouts of a GRPO group)"
        ),
    )
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
        nested = merged.pop("options", None)
        if nested is None:
            nested = {}
        if not isinstance(nested, dict):
            raise ValueError("reset option 'options' must be an object")
        given = {"seed": seed, "episode_id": episode_id}
        # null is "not given", at either level; a value given at both must be the same.
        nested = {k: v for k, v in nested.items() if v is not None}
        top = {k: v for k, v in {**merged, **given}.items() if v is not None}
        clash = sorted(k for k in top.keys() & nested.keys() if top[k] != nested[k])
        if clash:
            raise ValueError(
                f"reset option {clash[0]!r} is given twice with different values "
                "(at the top and under 'options')"
            )
        merged.update(nested)
        for key in given:
            if key in merged:
                given[key] = merged.pop(key)
        try:
            return cls(**given, **merged)
        except ValidationError as exc:
            problems = "; ".join(
                f"unknown option '{e['loc'][0]}'"
                if e["type"] == "extra_forbidden"
                else f"'{e['loc'][0]}': {e['msg'].removeprefix('Value error, ')}"
                for e in exc.errors()
            )
            raise ValueError(
                f"invalid reset options: {problems}. Accepted: {', '.join(cls.model_fields)}."
            ) from None
