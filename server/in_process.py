"""The server's environment in the caller's process: ``gymnasium.make`` without a server.

``gymnasium.make("analyst_env/DataAnalyst-v0")`` builds its environment here. Without
``base_url`` the episodes run in this process: a ``Runtime`` of its own (local
sandboxes, the configured tasks) and the same ``AnalystEnvironment`` a ``/ws``
session gets, so no network hop and nothing to start first. The Gymnasium adapter
itself (``client/gym_env.py``) only speaks to an ``EpisodeLink``; this module is the
in-process one, kept on the server's side because it runs the server's code (a
client never imports the server). The registered id's entry point that joins the two
is ``analyst_env.gymnasium_entry.make_gym_env``, above both.
"""

from __future__ import annotations

from typing import Any

from analyst_env.models import CallToolAction
from analyst_env.server.environment import AnalystEnvironment
from analyst_env.server.runtime import Runtime
from analyst_env.server.settings import Settings


class InProcessLink:
    """One ``AnalystEnvironment`` over a private ``Runtime`` (``Settings.from_env``)."""

    def __init__(self, dataset: str | None = None) -> None:
        self._runtime = Runtime(Settings.from_env(dataset=dataset))
        self._env = AnalystEnvironment(self._runtime)

    def reset(self, **kwargs: Any) -> dict[str, Any]:
        return self._env.reset(**kwargs).model_dump()

    def step(self, action: CallToolAction) -> dict[str, Any]:
        return self._env.step(action).model_dump()

    def close(self) -> None:
        self._env.close()
        self._runtime.close()
