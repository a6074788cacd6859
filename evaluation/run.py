"""One ``analyst-env eval`` run from start to report: settings, run directory, policy, outputs.

The CLI parses flags into :class:`EvalSettings` and hands over a server URL;
:func:`run_eval` opens (or resumes) the run's log, settles how the model is
offered tools, plays the episodes and writes ``report.json`` and
``report.html`` into the run directory (and to ``--json`` and the HTML beside
it when asked).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from analyst_env.datasets import Task
from analyst_env.evaluation.chat_client import ChatClient
from analyst_env.evaluation.engine import evaluate
from analyst_env.evaluation.html_report import render_html
from analyst_env.evaluation.policies import SCRIPTS, ModelPolicy
from analyst_env.run_records.report import build_report
from analyst_env.run_records.run_log import (
    LOG_NAME,
    REPORT_HTML,
    REPORT_JSON,
    RunLog,
    latest_rows,
    run_id_for,
    slug,
)


@dataclass
class EvalSettings:
    """What one run plays and how; the fields that change results make up the run id."""

    dataset: str
    policy: str | None = None
    model: str | None = None
    model_url: str | None = None
    api_key_env: str | None = None
    tool_format: str = "auto"
    samples: int = 1
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    seed: int | None = None
    max_turns: int = 20
    token_budget: int | None = None
    split: str | None = None
    limit: int | None = None
    concurrency: int = 8
    request_timeout_s: float = 300.0
    retries: int = 4
    retry_backoff_s: float = 1.0
    runs_dir: str = "runs"
    run_name: str | None = None
    fresh: bool = False
    include_quarantined: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def check(self) -> None:
        """Raise ``ValueError`` naming the first setting that cannot work."""
        if (self.policy is None) == (self.model is None):
            raise ValueError("give either --policy (oracle, null) or --model with --model-url")
        if self.policy is not None and self.policy not in SCRIPTS:
            raise ValueError(f"unknown policy {self.policy!r}; choose from {sorted(SCRIPTS)}")
        if self.model is not None and not self.model_url:
            raise ValueError(
                "--model needs --model-url (the OpenAI-compatible endpoint, e.g. .../v1)"
            )
        if self.tool_format not in ("auto", "native", "text"):
            raise ValueError("--tool-format must be auto, native or text")
        for name in ("samples", "max_turns", "concurrency", "limit", "token_budget", "max_tokens"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be at least 1")
        if self.retries < 0 or self.retry_backoff_s < 0 or self.request_timeout_s <= 0:
            raise ValueError(
                "--retries and --retry-backoff cannot be negative, --request-timeout must be > 0"
            )
        if self.api_key_env and not os.environ.get(self.api_key_env):
            raise ValueError(f"--api-key-env {self.api_key_env}: that variable is not set")
        if self.run_name is not None and slug(self.run_name, 120) != self.run_name:
            raise ValueError("--run-name may use only letters, digits, '_', '.' and '-'")

    def sampling(self) -> dict[str, Any]:
        """The request fields that shape sampling (the ones set)."""
        fields = {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_tokens": self.max_tokens,
            "seed": self.seed,
        }
        return {k: v for k, v in fields.items() if v is not None}

    def config(self) -> dict[str, Any]:
        """The settings that change results: the run's identity."""
        return {
            "dataset": self.dataset,
            "split": self.split,
            "limit": self.limit,
            "policy": self.policy,
            "model": self.model,
            "model_url": self.model_url,
            "tool_format": self.tool_format,
            "sampling": self.sampling(),
            "samples": self.samples,
            "max_turns": self.max_turns,
            "token_budget": self.token_budget,
            **({"include_quarantined": True} if self.include_quarantined else {}),
        }


def select_tasks(
    tasks: list[Task], split: str | None, limit: int | None, include_quarantined: bool = False
) -> list[Task]:
    """The tasks of ``split`` (all when None), the first ``limit`` of them.

    Quarantined tasks (a broken upstream gold, :attr:`Task.quarantine_reason`) are left
    out unless ``include_quarantined``: a model that answers them right scores 0.
    """
    chosen = [t for t in tasks if split is None or t.split == split]
    if not chosen:
        raise ValueError(f"no tasks in split {split!r}")
    if not include_quarantined:
        kept = [t for t in chosen if not t.quarantine_reason]
        if not kept:
            raise ValueError(
                f"all {len(chosen)} task(s) are quarantined (broken upstream gold); "
                "--include-quarantined plays them"
            )
        chosen = kept
    return chosen[:limit] if limit else chosen


def task_digest(tasks: list[Task]) -> str:
    """A short fingerprint of which tasks a run plays (a run of other tasks is another run)."""
    ids = "\n".join(t.id for t in tasks)
    return f"{len(tasks)}:{hashlib.sha256(ids.encode()).hexdigest()[:12]}"


async def run_eval(
    settings: EvalSettings,
    tasks: list[Task],
    base_url: str,
    *,
    headers: dict[str, str] | None = None,
    on_result: Callable[[dict[str, Any]], None] | None = None,
    on_start: Callable[[int], None] | None = None,
    json_path: str | None = None,
) -> tuple[dict[str, Any], Path]:
    """Play the run (resuming its log) and write its reports; the report and the run directory.

    Args:
        on_start: Called with the number of episodes already in the log, before any is played.
        json_path: Also write the report here, and the HTML report beside it.

    Raises:
        ValueError: A setting cannot work (see :meth:`EvalSettings.check`).
        RunMismatch: The run's log was written with other settings.
        ChatError: The model endpoint is unreachable before the first episode.
    """
    settings.check()
    config = {**settings.config(), "tasks": task_digest(tasks)}
    run_id = settings.run_name or run_id_for(config)
    run_dir = Path(settings.runs_dir).expanduser() / run_id
    header: dict[str, Any] = {
        "run_id": run_id,
        "config": config,
        "started_at": time.time(),
        "dataset": settings.dataset,
        "policy": settings.policy or "model",
        "samples": settings.samples,
        "sampling": settings.sampling(),
        "split": settings.split,
        "limit": settings.limit,
        "max_turns": settings.max_turns,
        "token_budget": settings.token_budget,
        "tasks_planned": len(tasks),
    }
    async with contextlib.AsyncExitStack() as stack:
        policy: str | ModelPolicy = settings.policy or "null"
        if settings.model is not None:  # settle the endpoint before a run directory exists
            chat = await stack.enter_async_context(chat_client(settings))
            tool_format = settings.tool_format
            if tool_format == "auto":
                tool_format = "native" if await chat.supports_native_tools() else "text"
            header["model"] = {
                "name": settings.model,
                "url": settings.model_url,
                "tool_format": tool_format,
            }
            policy = ModelPolicy(chat, tool_format)
        log = RunLog(run_dir / LOG_NAME, header, fresh=settings.fresh)
        log.header["model"] = header.get("model")
        try:
            if on_start is not None:
                on_start(sum(1 for key in log.finished() if key[1] < settings.samples))
            rows = await evaluate(
                base_url,
                tasks,
                policy,
                concurrency=settings.concurrency,
                headers=headers,
                on_result=on_result,
                samples=settings.samples,
                max_turns=settings.max_turns,
                token_budget=settings.token_budget,
                seed=settings.seed,
                log=log,
                run_id=run_id,
            )
        finally:
            log.close()
    run = {**log.header, "finished_at": time.time()}
    report = build_report(run, latest_rows(rows))
    report["finished_at"] = run["finished_at"]
    write_reports(report, run_dir, json_path)
    return report, run_dir


def chat_client(settings: EvalSettings) -> ChatClient:
    """The client of the run's model endpoint (the API key read from ``--api-key-env``)."""
    return ChatClient(
        settings.model_url or "",
        settings.model or "",
        api_key=os.environ.get(settings.api_key_env) if settings.api_key_env else None,
        timeout_s=settings.request_timeout_s,
        retries=settings.retries,
        backoff_s=settings.retry_backoff_s,
        sampling=settings.sampling(),
    )


def write_reports(
    report: dict[str, Any], run_dir: Path, json_path: str | None = None
) -> list[Path]:
    """``report.json`` and ``report.html`` in ``run_dir`` (and ``json_path`` plus its ``.html``)."""
    text = json.dumps(report, indent=2, default=str)
    html = render_html(report)
    targets = [(run_dir / REPORT_JSON, run_dir / REPORT_HTML)]
    if json_path:
        out = Path(json_path)
        targets.append((out, out.with_suffix(".html")))
    written = []
    for json_file, html_file in targets:
        json_file.parent.mkdir(parents=True, exist_ok=True)
        json_file.write_text(text, encoding="utf-8")
        html_file.write_text(html, encoding="utf-8")
        written += [json_file, html_file]
    return written
