"""Gymnasium adapter: ``gymnasium.make("analyst_env/DataAnalyst-v0")``.

Observations and actions are text. An action is one tool call written as JSON,
``{"tool": "run_sql", "arguments": {"query": "SELECT 1"}}``; the observation is
the text the tool returned. The reward is 0 until ``final_answer`` ends the
episode (``terminated``); running out of steps ends it with ``truncated``.

``gymnasium.make`` runs the environment in-process (its own local sandboxes and
tasks: ``server/in_process.py``, joined to this adapter by ``gymnasium_entry``) or,
with ``base_url``, against a running ``analyst-env serve``. ``AnalystGymEnv`` itself
only speaks to an ``EpisodeLink``: the network one here, or one given to it.

Example::

    import gymnasium as gym
    import analyst_env  # registers the id

    env = gym.make("analyst_env/DataAnalyst-v0")
    text, info = env.reset(seed=0)
    text, reward, terminated, truncated, info = env.step('{"tool": "list_files", "arguments": {}}')
"""

from __future__ import annotations

import json
from typing import Any, Protocol

import gymnasium as gym
from gymnasium import spaces

from analyst_env.models import CallToolAction

ENV_ID = "analyst_env/DataAnalyst-v0"


class UnicodeText(spaces.Text):
    """A ``Text`` space that accepts any string up to ``max_length``.

    Gymnasium's default charset is alphanumeric only, which rejects the spaces,
    punctuation and newlines every real observation and tool call contains.
    """

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length


class AnalystGymEnv(gym.Env[str, str]):
    """A data-analysis episode as a text-in, text-out ``gymnasium.Env``."""

    metadata = {"render_modes": ["ansi"]}

    def __init__(
        self,
        base_url: str | None = None,
        *,
        link: EpisodeLink | None = None,
        headers: dict[str, str] | None = None,
        max_text_length: int = 1_000_000,
        render_mode: str | None = None,
    ) -> None:
        self.observation_space = UnicodeText(max_length=max_text_length)
        self.action_space = UnicodeText(max_length=max_text_length)
        self.render_mode = render_mode
        self._last_text = ""
        if (base_url is None) == (link is None):
            raise ValueError(
                "give base_url (a running analyst-env serve) or link; to run episodes in this "
                f"process, use gymnasium.make({ENV_ID!r})"
            )
        if link is None:
            assert base_url is not None  # one of the two, checked above
            link = _Remote(base_url, headers)
        self._backend: EpisodeLink = link

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Start an episode. ``options`` may hold ``task_id`` or ``split``/``index``."""
        super().reset(seed=seed)
        obs = self._backend.reset(seed=seed, **(options or {}))
        files = "\n".join(
            f"- {f['name']} ({f['kind']}, {f['size_bytes']} bytes): {json.dumps(f['preview'])}"
            for f in obs["files"]
        )
        tools = ", ".join(t["name"] for t in obs["available_tools"])
        self._last_text = (
            f"{obs['instruction']}\n\nFiles in the working directory:\n{files}\n\nTools: {tools}"
        )
        info = {
            k: obs[k] for k in ("episode_id", "task_id", "files", "available_tools", "max_steps")
        }
        return self._last_text, info

    def step(self, action: str):
        """Run one tool call given as JSON text."""
        try:
            call = json.loads(action)
            name = call.get("tool") or call.get("name") or call.get("tool_name")
            arguments = call.get("arguments", {})
            if not isinstance(name, str) or not isinstance(arguments, dict):
                raise ValueError
        except (ValueError, AttributeError):
            self._last_text = (
                'Error: an action is a JSON object {"tool": <name>, "arguments": {...}}, '
                f"got {action[:200]!r}"
            )
            return self._last_text, 0.0, False, False, {"error": "invalid_action"}
        obs = self._backend.step(CallToolAction(tool_name=name, arguments=arguments))
        error = obs.get("error")
        self._last_text = (
            f"Error: {error['message']}"
            if error
            else str((obs.get("result") or {}).get("data", ""))
        )
        done = bool(obs.get("done"))
        reward = float(obs.get("reward") or 0.0) if done else 0.0
        submitted = name == "final_answer" and error is None
        info = {
            "step_count": obs.get("step_count"),
            "is_error": bool(error) or bool((obs.get("result") or {}).get("is_error")),
        }
        return self._last_text, reward, done and submitted, done and not submitted, info

    def render(self) -> str | None:
        return self._last_text if self.render_mode == "ansi" else None

    def close(self) -> None:
        self._backend.close()


class EpisodeLink(Protocol):
    """Where the episodes run: ``reset`` and ``step`` return observations as dicts."""

    def reset(self, **kwargs: Any) -> dict[str, Any]: ...
    def step(self, action: CallToolAction) -> dict[str, Any]: ...
    def close(self) -> None: ...


class _Remote(EpisodeLink):
    """A WebSocket session with a running server."""

    def __init__(self, base_url: str, headers: dict[str, str] | None) -> None:
        from analyst_env.client.analyst_client import AnalystEnv

        self._client = AnalystEnv(base_url=base_url, headers=headers).sync()
        self._client.connect()

    def reset(self, **kwargs: Any) -> dict[str, Any]:
        return self._client.reset(**kwargs).observation.model_dump()

    def step(self, action: CallToolAction) -> dict[str, Any]:
        return self._client.step(action).observation.model_dump()

    def close(self) -> None:
        self._client.close()
