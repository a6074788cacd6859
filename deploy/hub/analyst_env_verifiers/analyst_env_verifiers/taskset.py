"""analyst_env's tasks as a verifiers 0.4 taskset, played on a running analyst_env server.

A thin layer over verifiers' own OpenEnv taskset (``verifiers.v1.tasksets.openenv``):
each task is one ``reset`` of the server (a split and a place in it, or a task id),
``OpenEnvEnv`` plays it (the model replies with JSON actions such as
``{"type": "call_tool", "tool_name": "run_sql", "arguments": {...}}``) and the reward is
the sum of the server's step rewards, i.e. its verdict on the final answer (0..1).
The server is never vendored: point ``base_url`` (or ``ANALYST_ENV_URL``) at one.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any, Self

import httpx
import verifiers.v1 as vf
from pydantic import Field, model_validator
from verifiers.v1.tasksets.openenv import OpenEnvConfig, OpenEnvData, OpenEnvTask

ENV_NAME = "analyst_env"
"""The environment name in the server's Task API routes (``/analyst_env/...``)."""
URL_VARIABLE = "ANALYST_ENV_URL"


class AnalystEnvConfig(OpenEnvConfig):
    """Which server and which of its tasks (``--env.taskset.*`` flags of ``vf-eval``,
    ``--taskset.*`` of ``vf-validate``, ``[...env.taskset]`` keys in a prime-rl TOML)."""

    base_url: str | None = Field(default_factory=lambda: os.environ.get(URL_VARIABLE) or None)
    """The server (``http://host:8000``), or several replicas comma-separated (tasks are
    spread over them in turn). Defaults to ``$ANALYST_ENV_URL``."""
    split: str = "train"
    """The split whose tasks are played, by place (``split`` + ``index`` resets)."""
    start: int = Field(0, ge=0)
    """The first place in the split."""
    num_tasks: int | None = Field(None, ge=1)
    """How many places from ``start``; None = the rest of the split (as the server counts
    it). A split made on demand (``--dataset procedural``) counts a great many."""
    task_ids: list[str] = Field(default_factory=list)
    """Play exactly these task ids instead of a range of the split."""
    seed: int | None = Field(None, ge=0)
    """Seeds each episode's kernel and task draw (None = the server's choice)."""

    @model_validator(mode="after")
    def validate_config(self) -> Self:
        # Replaces OpenEnvConfig's check, which demands `env` or `base_url` already while
        # the CLI resolves the taskset id, before the flags are applied; a missing server
        # is reported by `load` instead.
        if self.env or self.use_docker or self.provider_kwargs:
            raise ValueError(
                "analyst_env runs as a server: give base_url, not env, use_docker or "
                "provider_kwargs"
            )
        return self


def replicas(base_url: str) -> list[str]:
    """The server URLs in ``base_url`` (comma-separated), without trailing slashes.

    As ``analyst_env.client.endpoints.split_urls`` reads them; this package cannot import
    analyst_env (its openenv 0.10 and verifiers 0.4 need different ``mcp`` majors)."""
    return [u.strip().rstrip("/") for u in base_url.split(",") if u.strip()]


def split_size(url: str, split: str) -> int:
    """How many tasks the server at ``url`` has in ``split``.

    Raises:
        RuntimeError: The server is unreachable, wants a token, or has no such split.
    """
    try:
        with httpx.Client(base_url=url, timeout=30) as http:
            answer = http.post(f"/{ENV_NAME}/num_tasks", json={"split": split})
            if answer.status_code == 401:
                raise RuntimeError(
                    f"the analyst_env server at {url} requires a bearer token, which verifiers "
                    "0.4's OpenEnv client cannot send: serve it without --token on a private "
                    "network, or behind a proxy that adds the header"
                )
            count = int(answer.raise_for_status().json()["num_tasks"])
            if count == 0:
                splits = [s["name"] for s in http.get(f"/{ENV_NAME}/splits").json()]
                raise RuntimeError(
                    f"the server at {url} has no tasks in split {split!r}; its splits: {splits}"
                )
    except httpx.HTTPError as exc:
        raise RuntimeError(f"cannot reach the analyst_env server at {url}: {exc}") from exc
    return count


def task_name(reset: dict[str, Any], idx: int) -> str:
    """What the traces call a task: its id, else its split and place, else its position."""
    if reset.get("task_id"):
        return str(reset["task_id"])
    if "split" in reset and "index" in reset:
        return f"{reset['split']}#{reset['index']}"
    return f"reset#{idx}"


class AnalystEnvTaskset(vf.Taskset[OpenEnvTask, AnalystEnvConfig]):
    """One task per reset; played by ``OpenEnvEnv`` (exported next to this class)."""

    def load(self) -> Iterator[OpenEnvTask]:
        config = self.config
        if not config.base_url:
            raise ValueError(
                "no analyst_env server: pass --env.taskset.base-url http://HOST:8000 "
                f"(--taskset.base-url for vf-validate) or set {URL_VARIABLE}"
            )
        urls = replicas(config.base_url)
        seed = {} if config.seed is None else {"seed": config.seed}
        resets: Iterator[dict[str, Any]]
        if "resets" in config.model_fields_set:  # OpenEnvConfig's own knob, taken as given
            resets = iter(config.resets)
        elif config.task_ids:
            resets = ({"task_id": task_id, **seed} for task_id in config.task_ids)
        else:
            stop = split_size(urls[0], config.split)  # replicas serve the same tasks
            if config.num_tasks is not None:
                stop = min(stop, config.start + config.num_tasks)
            resets = (
                {"split": config.split, "index": i, **seed} for i in range(config.start, stop)
            )
        for idx, reset in enumerate(resets):
            url = urls[idx % len(urls)]
            yield OpenEnvTask(
                OpenEnvData(
                    name=task_name(reset, idx),
                    prompt=None,
                    env=None,
                    base_url=url,
                    use_docker=False,
                    provider_kwargs={},
                    reset=reset,
                ),
                config.task,
            )
