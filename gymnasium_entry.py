"""The registered Gymnasium id's entry point: ``gymnasium.make("analyst_env/DataAnalyst-v0")``.

It joins two layers that never import each other: the Gymnasium adapter
(``client/gym_env.py``, which only speaks to an ``EpisodeLink``) and, without
``base_url``, the server's in-process link (``server/in_process.py``, the same
``AnalystEnvironment`` a ``/ws`` session gets). The server is imported only then,
so ``gymnasium.make(..., base_url=...)`` loads nothing of it.
"""

from __future__ import annotations

from typing import Any

from analyst_env.client.gym_env import AnalystGymEnv


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
    from analyst_env.server.in_process import InProcessLink

    return AnalystGymEnv(link=InProcessLink(dataset), **kwargs)
