"""Which episode a rollout plays, named the same way by every trainer adapter.

A dataset row (TRL's columns, veRL's ``extra_info``, a SkyRL row, an OpenRLHF label,
a HUD or ART scenario) names its episode by task id, by a split's place (split and
index), or by a curriculum client; a row that names none of them is refused before any
session opens. Without that rule the server would draw a task by the seed alone, and a
row with no seed either would give each rollout of a GRPO group a different task.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["AnalystScenario", "EpisodeStartError"]


@dataclass(frozen=True)
class AnalystScenario:
    """Which episode a rollout plays: a task by id, a split's task by index, or the task a
    ``--curriculum`` server picks for ``client_id`` (one per ``curriculum_group``); and a seed.

    Rollouts of one scenario with one seed start from the same state, so an
    ART group compares the model's attempts at the same problem.
    """

    task_id: str | None = None
    split: str | None = None
    index: int | None = None
    seed: int | None = None
    client_id: str | None = None
    curriculum_group: str | None = None

    @classmethod
    def from_fields(cls, fields: Mapping[str, Any]) -> AnalystScenario:
        """The scenario a dataset row's fields name (TRL's row, veRL's ``extra_info``, a tool's
        ``create_kwargs``): ``task_id``; else ``client_id`` (and ``curriculum_group``); else
        ``split`` and ``index``. ``seed`` in every case.

        Raises:
            ValueError: The fields name no episode.
        """
        seed = None if fields.get("seed") is None else int(fields["seed"])
        if fields.get("task_id"):
            return cls(task_id=str(fields["task_id"]), seed=seed)
        if fields.get("client_id"):
            group = fields.get("curriculum_group")
            return cls(
                client_id=str(fields["client_id"]),
                curriculum_group=None if group is None else str(group),
                seed=seed,
            )
        if fields.get("index") is None or not fields.get("split"):
            raise ValueError("a row needs a task_id, a split and an index, or a client_id")
        return cls(split=str(fields["split"]), index=int(fields["index"]), seed=seed)

    def reset_options(self) -> dict[str, Any]:
        """The keyword arguments of ``reset`` that choose this episode."""
        placed = self.split is not None and self.index is not None
        if self.task_id is None and not placed and self.client_id is None:
            raise ValueError("a scenario needs a task_id, a split and an index, or a client_id")
        return {k: v for k, v in asdict(self).items() if v is not None}


class EpisodeStartError(RuntimeError):
    """The server could not start the episode (its sandbox or a setup hook failed).

    Raised rather than scored: the policy did nothing wrong, so the rollout is
    one of the group's exceptions, not a zero reward.
    """
