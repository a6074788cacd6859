"""Server settings, read once from ``ANALYST_ENV_*`` environment variables.

The CLI flags of ``analyst-env serve`` override the same fields (``Settings.from_args``),
so the Dockerfile, a Space's variables and a terminal all configure one object.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field, field_validator

if TYPE_CHECKING:
    import argparse


class Settings(BaseModel):
    """Everything an operator can configure. Units are in the names."""

    dataset: str = Field(
        default="starter",
        description=(
            "Dataset(s) to serve: a shipped set name or FORMAT:PATH; comma-separated for several"
        ),
    )
    backend: str = Field(
        default="local",
        description="Sandbox backend: local, docker, modal, e2b, daytona, agent-sandbox or "
        "opensandbox (analyst-env backends lists them)",
    )
    max_sessions: int = Field(
        default=64, ge=1, description="Concurrent episodes (WebSocket sessions)"
    )
    session_idle_timeout_s: float = Field(
        default=900.0, gt=0, description="Idle sessions without a WebSocket are reaped after this"
    )
    cell_timeout_s: float = Field(default=30.0, gt=0, description="Per-cell wall-clock limit")
    shell_timeout_s: float = Field(default=60.0, gt=0, description="Per-shell-command limit")
    output_limit_chars: int = Field(default=20_000, ge=200, description="Tool output is cut here")
    sql_max_rows: int = Field(default=50, ge=1, description="Rows shown by run_sql")
    max_answer_bytes: int = Field(
        default=65_536,
        ge=1,
        description="final_answer longer than this (UTF-8 bytes) scores 0 without being parsed",
    )
    score_timeout_s: float = Field(
        default=180.0,
        gt=0,
        description="Wall-time limit of one scoring (its own process; recalculation included)",
    )
    score_memory_mb: int = Field(
        default=2048, ge=128, description="Heap limit of the scoring process"
    )
    score_workers: int = Field(
        default=2,
        ge=0,
        le=64,
        description=(
            "Long-lived scoring workers (~170 MB each) that score answers without forking the "
            "server; 0: every scoring forks"
        ),
    )
    scoring_profile: str = Field(
        default="strict",
        pattern="^(strict|official)$",
        description=(
            "strict closes known loopholes of benchmark scorers; official reproduces them as "
            "published"
        ),
    )
    serve_quarantined: bool = Field(
        default=False,
        description=(
            "Let resets draw upstream tasks whose gold is known to be broken (metadata "
            "gold_status); by task_id they are served either way"
        ),
    )
    max_scored_file_mb: int = Field(
        default=64,
        ge=1,
        description="A file the agent wrote that is larger than this is not scored (reward 0)",
    )
    memory_limit_mb: int = Field(
        default=4096,
        ge=256,
        description="Memory per episode (cgroup) and address-space limit per process",
    )
    cpu_limit: float = Field(default=1.0, gt=0, description="CPU cores per episode (cgroup quota)")
    pids_limit: int = Field(default=256, ge=16, description="Processes and threads per episode")
    disk_limit_mb: int = Field(
        default=1024, ge=1, description="Size of each episode's tmpfs working directory"
    )
    isolation: str = Field(
        default="auto",
        pattern="^(auto|full|userns|landlock|none)$",
        description=(
            "Local sandbox isolation: auto (the strongest that works here, never none), full "
            "(root), userns, landlock, or none (unconfined: by name only, loopback only, no "
            "builds)"
        ),
    )
    per_process_limits: bool = Field(
        default=False,
        description=(
            "Local sandbox: serve where memory, CPU and pids cannot be limited per episode "
            "(no writable cgroups), with per-process limits (RLIMIT_AS) instead; without it "
            "such a host refuses to start"
        ),
    )
    standbys: int = Field(
        default=4,
        ge=0,
        le=4096,
        description="Pre-forked kernels kept ready per image however quiet it is (0: none)",
    )
    max_standbys: int | None = Field(
        default=None,
        ge=0,
        le=4096,
        description=(
            "Pre-forked kernels kept ready per image at most: the pool grows to the largest "
            "burst of resets of the last 10 minutes, up to this (unset: a fixed pool of "
            "'standbys')"
        ),
    )
    zygotes: int | None = Field(
        default=None,
        ge=1,
        le=256,
        description=(
            "Local backend: zygotes forking one image's kernels at once at most (the first "
            "boots on first use, the others on the first burst of resets; unset: one per core)"
        ),
    )
    uid_base: int | None = Field(
        default=None,
        ge=65_536,
        description=(
            "Local 'full' isolation: first per-slot uid (default: the first range no other "
            "server holds)"
        ),
    )
    remote_warm_slots: int = Field(
        default=1,
        ge=0,
        le=64,
        description="Remote backends but e2b: idle sandboxes kept ready per image",
    )
    docker_runtime: str | None = Field(
        default=None,
        description=(
            "Docker: container runtime, e.g. 'runsc' for gVisor (default: the engine's runc)"
        ),
    )
    modal_app: str = Field(
        default="analyst-env",
        description="Modal: the app owning the sandboxes and published images",
    )
    e2b_template: str | None = Field(
        default=None,
        description=(
            "E2B: run every episode from this template instead of one built per environment"
        ),
    )
    agent_sandbox_namespace: str | None = Field(
        default=None,
        description=(
            "agent-sandbox: the namespace of the warm pools and claims (default: the server "
            "pod's own, else 'default')"
        ),
    )
    agent_sandbox_warm_pool: str = Field(
        default="analyst-env-sandbox",
        description="agent-sandbox: the SandboxWarmPool serving the default image",
    )
    opensandbox_image: str | None = Field(
        default=None,
        description=(
            "OpenSandbox: run every episode from this image (one the server can pull, holding "
            "the slot runner) instead of one built per environment on the local Docker engine"
        ),
    )
    coreweave_image: str | None = Field(
        default=None,
        description=(
            "coreweave: the image reference default episodes run (Python with the slot "
            "runner's packages, in a registry CoreWeave pulls from; CoreWeave builds no images)"
        ),
    )
    coreweave_image_repository: str | None = Field(
        default=None,
        description=(
            "coreweave: the repository (<registry>/<path>) a recipe's runner image is pushed "
            "to, built on the Docker engine of DOCKER_HOST; CoreWeave runs <repository>:<tag>. "
            "Unset, recipes of their own are refused"
        ),
    )
    opensandbox_egress: str = Field(
        default="deny",
        pattern="^(deny|allow)$",
        description=(
            "OpenSandbox: 'deny' sends a deny-all egress policy (the server needs its egress "
            "sidecar); 'allow' leaves sandboxes on the server's container network"
        ),
    )
    backend_connect_timeout_s: float = Field(
        default=10.0,
        gt=0,
        description="Remote backends: start-up fails if the service does not answer within this",
    )
    token: str | None = Field(
        default=None, description="Bearer token required on every route but /health"
    )
    allow_builds: bool = Field(
        default=False,
        description=(
            "Allow creating, changing and building sandbox environments (/envs) on a server "
            "without a token"
        ),
    )
    resume_grace_s: float = Field(
        default=120.0,
        ge=0,
        description=(
            "How long the episode of a dropped ?resume=1 socket waits to be resumed (0: never "
            "parked)"
        ),
    )
    drain_timeout_s: float = Field(
        default=30.0,
        ge=0,
        description="On SIGTERM/SIGINT, how long running steps may take to finish before exit",
    )
    state_dir: str = Field(
        default_factory=lambda: _default_state_dir(),
        description=(
            "Where the server keeps what it records: trajectories/ holds one JSONL file per episode"
        ),
    )
    curriculum: float | None = Field(
        default=None,
        gt=0,
        lt=1,
        description=(
            "Keep each client's success rate near this target by choosing procedural depth "
            "(needs a procedural dataset; off when unset; state under state_dir/curriculum)"
        ),
    )
    record_trajectories: bool = Field(
        default=True,
        description=(
            "Record every episode (actions, observations, rewards, timings) under state_dir"
        ),
    )
    trajectories_kept: int = Field(
        default=10_000,
        ge=0,
        description="Recorded episodes kept; the oldest files beyond this are deleted (0: all)",
    )
    log_format: str = Field(
        default="text",
        pattern="^(text|json)$",
        description="Log lines: text, or json (one object per line, for log collectors)",
    )
    process_reward: str | None = Field(
        default=None,
        description=(
            "'module:function' scoring every tool step into metadata['process_reward'] (off when "
            "unset)"
        ),
    )

    @field_validator("process_reward")
    @classmethod
    def _hook_imports(cls, spec: str | None) -> str | None:
        """Fail at start-up, not at the first step, if the process-reward hook cannot be loaded."""
        if spec is not None:
            from analyst_env.server.process_reward import load_hook

            load_hook(spec)
        return spec

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: object) -> Settings:
        """Settings from ``ANALYST_ENV_<FIELD>`` variables, then ``overrides`` (ignoring None)."""
        source: Mapping[str, str] = os.environ if environ is None else environ
        values: dict[str, object] = {}
        for name in cls.model_fields:
            raw = source.get(f"ANALYST_ENV_{name.upper()}")
            if raw not in (None, ""):
                values[name] = raw
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls.model_validate(values)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Settings:
        """Settings from the environment, then the flags of a parsed ``analyst-env`` command.

        A flag the command does not have, or did not get, leaves the field to the
        environment (``serve``, ``eval``, ``validate`` and ``export`` share this).
        """
        return cls.from_env(
            dataset=getattr(args, "dataset", None),
            max_sessions=getattr(args, "max_sessions", None),
            cell_timeout_s=getattr(args, "cell_timeout", None),
            output_limit_chars=getattr(args, "output_limit", None),
            backend=getattr(args, "backend", None),
            token=getattr(args, "token", None),
            allow_builds=getattr(args, "allow_builds", None) or None,
            isolation=getattr(args, "isolation", None),
            per_process_limits=getattr(args, "per_process_limits", None) or None,
            curriculum=getattr(args, "curriculum", None),
        )


def _default_state_dir() -> str:
    """``state/`` under the cache root (``$ANALYST_ENV_CACHE`` or ``~/.cache/analyst_env``)."""
    from analyst_env.paths import cache_root

    return str(cache_root() / "state")
