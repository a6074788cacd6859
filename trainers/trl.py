"""Train on an analyst_env server with TRL's ``GRPOTrainer`` (``environment_factory``).

TRL drives tool use itself: it renders the methods of an environment class as
tools into the chat template, parses the model's tool calls, calls the methods
and feeds their return values back, then asks ``get_reward()``. This module
supplies that class, :class:`AnalystToolEnv`, whose tool methods are generated
from the server's own tool catalog (typed, with Google-style docstrings, set on
the class, the pattern of ``trl.experimental.openreward``), and
:class:`AnalystSpec`, which bundles the training rows, the factory and the
reward functions the way TRL's ``HarborSpec`` does::

    from trl import GRPOConfig, GRPOTrainer
    from analyst_env.trainers.trl import AnalystSpec

    spec = AnalystSpec("http://127.0.0.1:8000", dataset="starter", split="train")
    trainer = GRPOTrainer(model=..., args=GRPOConfig(...), train_dataset=spec.train_dataset,
                          environment_factory=spec.environment_factory,
                          reward_funcs=spec.reward_funcs)

Everything here is module-level and the factory is a ``functools.partial``, so
``AsyncGRPOTrainer`` can pickle it into its rollout worker. Each ``reset``
opens a fresh WebSocket session (closing the previous one), so a socket that
idled through a long generation never breaks the next episode.
"""

from __future__ import annotations

import functools
from typing import Any

import httpx

from analyst_env.client.analyst_client import AnalystEnv
from analyst_env.client.endpoints import split_urls
from analyst_env.prompts import SYSTEM_PROMPT, task_prompt
from analyst_env.trainers.scenario import AnalystScenario
from analyst_env.trainers.tool_catalog import bind_tools, fetch_tool_specs

ENV_NAME = "analyst_env"


class EpisodeOverError(RuntimeError):
    """A tool was called after the episode ended (TRL counts it as a failed tool call)."""


class AnalystToolEnv:
    """One rollout's episode on an analyst_env server, for TRL's ``environment_factory``.

    TRL builds instances with no arguments, so pass the server through
    ``functools.partial(AnalystToolEnv, base_url=...)`` (what :class:`AnalystSpec`
    does). Constructing one binds the server's tools onto the class as methods.

    Attributes:
        reward: The episode's reward once it ended, else 0.0.
        done: Whether the episode ended (final answer, step limit or failed setup).
        task_id: The task of the current episode.
    """

    def __init__(
        self, base_url: str, *, token: str | None = None, message_timeout_s: float = 300.0
    ) -> None:
        self._base_url = ",".join(split_urls(base_url))  # one server, or several replicas
        self._headers = {"Authorization": f"Bearer {token}"} if token else None
        self._timeout = message_timeout_s
        self._client: Any = None
        self.reward = 0.0
        self.done = False
        self.task_id: str | None = None
        bind_tools(fetch_tool_specs(self._base_url, self._headers), type(self))

    def reset(self, **row: Any) -> str:
        """Start an episode on a fresh session; returns the task prompt (instruction and files).

        TRL passes every column of the dataset row; ``task_id`` (or ``split`` and
        ``index``) and ``seed`` choose the episode (neither: a ``--curriculum`` server
        chooses, for ``client_id``, one task per ``curriculum_group``), the rest is ignored.

        Raises:
            ValueError: The row names no task (no ``task_id``, no ``split`` and ``index``,
                no ``client_id``): every rollout of a group would get a different task.
        """
        options = AnalystScenario.from_fields(row).reset_options()
        self._close()
        self.reward, self.done = 0.0, False
        self._client = AnalystEnv(
            base_url=self._base_url, headers=self._headers, message_timeout_s=self._timeout
        ).sync()
        self._client.connect()
        obs = self._client.reset(**options).observation
        self.task_id = obs.task_id
        prompt = task_prompt(obs.instruction, obs.files)
        if obs.done:  # the sandbox or a setup hook failed: nothing to do, reward 0
            self.done = True
            prompt += f"\n\n(The environment failed to start: {obs.message})"
        return prompt

    def get_reward(self) -> float:
        """The episode's reward: the verifier's score after ``final_answer``, else 0.0."""
        return float(self.reward)

    def _call(self, name: str, arguments: dict[str, Any]) -> str:
        if self._client is None:
            raise EpisodeOverError("No episode is running: reset() has not been called.")
        if self.done:
            raise EpisodeOverError("The episode is over; no further tool calls are accepted.")
        result = self._client.call_tool(name, **arguments)
        if result.done:
            self.done = True
            self.reward = float(result.reward or 0.0)
        return result.observation.text

    def _close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            try:
                client.close()
            except Exception:  # the server may already have dropped the session
                pass

    def __del__(self) -> None:
        self._close()


def environment_reward(environments: list[AnalystToolEnv] | None = None, **_: Any) -> list[float]:
    """TRL reward function: each rollout's episode reward (for trainers that do not call
    ``get_reward``)."""
    return [env.get_reward() for env in environments or []]


class AnalystSpec:
    """Training rows, environment factory and reward functions for one analyst_env server.

    Args:
        base_url: The server, e.g. ``http://127.0.0.1:8000``, or several replicas
            (comma-separated): each environment's episodes go to the least-loaded.
        dataset: Only tasks whose ``metadata.source`` is this (a server may serve
            several datasets); None for all.
        split: The split to train on.
        num_tasks: Only N tasks of the split (from ``start``). Required for a split whose
            tasks are made on demand (``procedural``): its rows are then indices, and no task
            is made before its first reset.
        start: The first task (index into the split) the rows use.
        seed: The reset seed of every row (same task and seed, same initial state,
            so the rollouts of one GRPO group start alike).
        token: Bearer token, if the server requires one.
    """

    def __init__(
        self,
        base_url: str,
        dataset: str | None = None,
        split: str = "train",
        *,
        num_tasks: int | None = None,
        start: int = 0,
        seed: int = 0,
        token: str | None = None,
    ) -> None:
        if start < 0 or (num_tasks is not None and num_tasks < 1):
            raise ValueError("start must be >= 0 and num_tasks >= 1")
        self.base_url = ",".join(split_urls(base_url))  # one server, or several replicas
        self.dataset = dataset
        self.split = split
        self.num_tasks = num_tasks
        self.start = start
        self.seed = seed
        self.token = token

    def tasks(self) -> list[dict[str, Any]]:
        """The public task specs of the split from the server's Task API (no answers).

        For a split whose tasks are made on demand, each entry is only its place
        (``{"id": None, "split": ..., "index": ...}``): listing would make every task.

        Raises:
            ValueError: The split is unknown, no task matches, or the split is made on
                demand and ``num_tasks`` is missing (or ``dataset`` is given).
        """
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else None
        first = split_urls(self.base_url)[0]  # replicas serve the same tasks
        with httpx.Client(base_url=first, headers=headers, timeout=60) as http:
            splits = [s["name"] for s in http.get(f"/{ENV_NAME}/splits").raise_for_status().json()]
            if self.split not in splits:
                raise ValueError(f"the server has no split {self.split!r}; splits: {splits}")
            listed = http.post(f"/{ENV_NAME}/tasks", json={"split": self.split})
            if listed.status_code == 400:  # a split that exists but is not listed whole
                return self._places(http)
            tasks = listed.raise_for_status().json()["tasks"]
        if self.dataset is not None:
            tasks = [t for t in tasks if (t.get("metadata") or {}).get("source") == self.dataset]
        stop = None if self.num_tasks is None else self.start + self.num_tasks
        tasks = tasks[self.start : stop]
        if not tasks:
            raise ValueError(
                f"no tasks in split {self.split!r}"
                + (f" from dataset {self.dataset!r}" if self.dataset else "")
            )
        return tasks

    def _places(self, http: httpx.Client) -> list[dict[str, Any]]:
        """Indices ``start .. start + num_tasks - 1`` of a split whose tasks are made on demand."""
        if self.num_tasks is None:
            raise ValueError(
                f"split {self.split!r} makes its tasks on demand (it is unbounded): pass "
                "num_tasks=N (and start=I) to train on N of them, or freeze a set with "
                "`analyst-env generate` and serve it as tasks:DIR"
            )
        if self.dataset is not None:
            raise ValueError(
                f"split {self.split!r} makes its tasks on demand: it cannot be filtered by "
                "dataset without making every task; serve that dataset alone instead"
            )
        count = (
            http.post(f"/{ENV_NAME}/num_tasks", json={"split": self.split})
            .raise_for_status()
            .json()["num_tasks"]
        )
        stop = min(self.start + self.num_tasks, count)
        if stop <= self.start:
            raise ValueError(f"no tasks in split {self.split!r} from index {self.start}")
        return [{"id": None, "split": self.split, "index": i} for i in range(self.start, stop)]

    @functools.cached_property
    def train_dataset(self):
        """A ``datasets.Dataset``: ``prompt`` (system message, empty user turn that ``reset``
        fills), ``task_id``, ``seed``; a split made on demand has ``split`` and ``index``
        instead of ``task_id``."""
        from datasets import Dataset

        prompt = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": ""}]
        rows = [
            {"prompt": prompt, "task_id": t["id"], "seed": self.seed}
            if t["id"] is not None
            else {"prompt": prompt, "split": t["split"], "index": t["index"], "seed": self.seed}
            for t in self.tasks()
        ]
        return Dataset.from_list(rows)

    @property
    def environment_factory(self) -> functools.partial:
        """A picklable factory of :class:`AnalystToolEnv` bound to this server."""
        return functools.partial(AnalystToolEnv, base_url=self.base_url, token=self.token)

    @property
    def reward_funcs(self) -> list:
        """Empty: the environment owns the reward through ``get_reward``, which TRL adds by itself.

        (Passing :func:`environment_reward` as well would count the reward twice.)
        """
        return []
