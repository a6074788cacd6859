"""The server's environment in the caller's process: ``gymnasium.make`` without a server.

``gymnasium.make("analyst_env/DataAnalyst-v0")`` builds its environment here. Without
``base_url`` the episodes run in this process: a ``Runtime`` of its own (local
sandboxes, the configured tasks) and the same ``AnalystEnvironment`` a ``/ws``
session gets, so no network hop and nothing to start first. The Gymnasium adapter
itself (``client.gym_env``) only speaks to an ``EpisodeLink``; this module is the
in-process one, kept on the server's side because it runs the server's code (a
client never imports the server).
"""

from __future__ import annotations

from typing import Any

from analyst_env.client.gym_env import AnalystGymEnv
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


def make_gym_env(
    base_url: str | None = None, *, dataset: str | None = None, **kwargs: Any
) -> AnalystGymEnv:
    """The registered id's entry point: against ``base_url``, or in this process.

    Args:
        base_url: A running ``analyst-env serve``; ``None`` runs episodes here.
        dataset: The tasks to serve in-process (a dataset spec such as ``starter``);
            ``None`` takes ``ANALYST_ENV_DATASET`` or the default. Ignored with ``base_url``.
        **kwargs: Passed to ``AnalystGymEnv`` (``headers``, ``max_text_length``,
            ``render_mode``).
    """
    if base_url is not None:
        return AnalystGymEnv(base_url, **kwargs)
    return AnalystGymEnv(link=InProcessLink(dataset), **kwargs)
