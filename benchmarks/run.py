"""``analyst-env bench``: analyst_env against a Jupyter kernel per episode and the protocol floor.

One run starts each target as its own server process, measures it from the
client side over ``/ws`` with the same driver (``measure.py``), and reports
``{"figures": {NAME: {"analyst_env": v, "jupyter_kernel": v, "protocol_floor": v}}}``
plus the goals of the sandbox work with their verdicts. A baseline is ``None``
where a figure has no meaning for it (a no-op environment has no ``describe``).
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from analyst_env.benchmarks import measure, paired
from analyst_env.benchmarks.servers import (
    ServerProcess,
    analyst_server,
    baseline_server,
    import_time_s,
)

TARGETS = ("analyst_env", "jupyter_kernel", "protocol_floor")
BURST_FIGURES = (
    "burst_reset_p50_ms",
    "burst_reset_p99_ms",
    "burst_first_step_p50_ms",
    "burst_first_step_p99_ms",
    "burst_step_p50_ms",
    "burst_step_p99_ms",
    "burst_steps_per_s",
    "burst_again_reset_p50_ms",
    "burst_again_reset_p99_ms",
)
CLIENT_IMPORTS = {
    "analyst_env": "import analyst_env.client",
    "jupyter_kernel": "import jupyter_client",
    "protocol_floor": "from openenv.core import GenericEnvClient",
}


@dataclass
class BenchConfig:
    """Sample sizes. The Jupyter baseline gets smaller ones: each of its resets costs ~1.5 s."""

    task_id: str = "starter-sales-000"
    n_reset: int = 200
    n_step: int = 300
    n_describe: int = 50
    idle_episodes: int = 100
    max_probe: int = 2000
    grpo_clients: int = 64
    grpo_cells: int = 5
    jupyter_n_reset: int = 10
    jupyter_idle_episodes: int = 20
    jupyter_max_probe: int = 40
    burst_clients: int = 256
    burst_rounds: int = 20
    include_jupyter: bool = True
    burst_only: bool = False  # only the burst figures (analyst_env and the protocol floor)
    import_only: bool = False  # only the client import figure (no server started)
    import_runs: int = 5  # fresh interpreters per client import timing (the median is kept)
    settle_max_s: float = 60.0  # longest wait for a quiet machine before each measurement
    worker_counts: tuple[int, ...] = (1, 2)  # `serve --workers N` compared (2 = the cores here)
    worker_clients: int = 128
    worker_rounds: int = 10
    # the trivial cell stepped on analyst_env and the floor in turn: rounds, steps per round
    paired_blocks: int = 20
    paired_steps: int = 100

    @property
    def reset_frame(self) -> str:
        """The ``reset`` frame every measurement sends: the benchmark's task."""
        return json.dumps({"type": "reset", "data": {"task_id": self.task_id}})

    @classmethod
    def quick(cls) -> BenchConfig:
        """A smoke-test run: every code path, tiny samples."""
        return cls(
            n_reset=5,
            n_step=10,
            n_describe=3,
            idle_episodes=4,
            max_probe=12,
            grpo_clients=4,
            grpo_cells=2,
            jupyter_n_reset=2,
            jupyter_idle_episodes=2,
            jupyter_max_probe=3,
            burst_clients=8,
            burst_rounds=3,
            settle_max_s=5.0,
            worker_counts=(2,),
            worker_clients=4,
            worker_rounds=2,
            import_runs=3,
            paired_blocks=2,
            paired_steps=5,
        )


#: The server the burst figures of analyst_env are measured on: the standby pool may grow to a
#: burst (``ANALYST_ENV_MAX_STANDBYS``, off by default so an idle server holds only its floor).
BURST_SERVER_ENV = {"ANALYST_ENV_MAX_STANDBYS": "256"}


def _measure_target(
    server: ServerProcess,
    cfg: BenchConfig,
    target: str,
    burst_server: Callable[[], ServerProcess] | None = None,
) -> dict[str, float | None]:
    ws_url = server.ws_url
    reset = cfg.reset_frame
    slow = target == "jupyter_kernel"
    n_reset = cfg.jupyter_n_reset if slow else cfg.n_reset
    idle = cfg.jupyter_idle_episodes if slow else cfg.idle_episodes
    probe = cfg.jupyter_max_probe if slow else cfg.max_probe
    n_describe = None if target == "protocol_floor" else cfg.n_describe

    async def bursts() -> Mapping[str, float | None]:
        if slow:  # a kernel per session: 256 of them at once is not a figure, it is a swap storm
            return dict.fromkeys(BURST_FIGURES)
        await measure.settle(max_wait_s=cfg.settle_max_s)
        if burst_server is None:
            return await measure.burst(
                ws_url, reset, cfg.burst_clients, cfg.burst_rounds, settle_max_s=cfg.settle_max_s
            )
        with burst_server() as other:
            await measure.settle(max_wait_s=cfg.settle_max_s)
            return await measure.burst(
                other.ws_url,
                reset,
                cfg.burst_clients,
                cfg.burst_rounds,
                settle_max_s=cfg.settle_max_s,
            )

    async def run() -> dict[str, float | None]:
        if cfg.burst_only:
            return dict(await bursts())
        # The concurrency probe comes last: it leaves the most work behind (up to two thousand
        # episodes to tear down); every measurement starts on a quiet machine.
        await measure.settle(max_wait_s=cfg.settle_max_s)
        samples = await measure.latencies(ws_url, reset, n_reset, cfg.n_step, n_describe)
        await measure.settle(max_wait_s=cfg.settle_max_s)
        pss = await measure.idle_pss_per_episode(ws_url, reset, idle, server.pss_mib)
        await measure.settle(max_wait_s=cfg.settle_max_s)
        grpo = await measure.grpo_batch_s(ws_url, reset, cfg.grpo_clients, cfg.grpo_cells)
        burst = await bursts()
        await measure.settle(max_wait_s=cfg.settle_max_s)
        reached = await measure.max_concurrent(ws_url, reset, probe, batch=min(50, probe))
        return {
            "reset_p50_ms": statistics.median(samples["reset"]),
            "reset_p99_ms": measure.quantile(samples["reset"], 0.99),
            "reset_burst_p50_ms": statistics.median(samples["reset_burst"]),
            "step_p50_ms": statistics.median(samples["step"]),
            "step_p99_ms": measure.quantile(samples["step"], 0.99),
            "describe_p50_ms": statistics.median(samples["describe"]) if n_describe else None,
            "idle_pss_mib": pss,
            "max_concurrent": reached,
            "grpo_batch_s": grpo,
            **burst,
        }

    figures = asyncio.run(run())
    figures["serve_cold_start_s"] = server.cold_start_s
    return figures


def _task_csv(task_id: str) -> str | None:
    from analyst_env.datasets import load_dataset

    task = load_dataset("starter").by_id().get(task_id)
    csvs = [p for n, p in (task.files.items() if task else []) if n.endswith(".csv")]
    return csvs[0] if csvs else None


def _client_imports(cfg: BenchConfig, log) -> dict[str, float | None]:
    """The client import figure of each target: a fresh interpreter's import, median of runs."""
    out: dict[str, float | None] = {}
    for target in TARGETS:
        if target == "jupyter_kernel" and not cfg.include_jupyter:
            out[target] = None
            continue
        log(f"timing the client import of {target} ...")
        out[target] = import_time_s(CLIENT_IMPORTS[target], runs=cfg.import_runs)
    return out


CLIENT_IMPORT_NOTE = (
    "median of fresh interpreters (BenchConfig.import_runs), minus a bare interpreter's "
    "start-up; " + "; ".join(f"{t}: `{s}`" for t, s in CLIENT_IMPORTS.items())
)


def run_bench(cfg: BenchConfig, log=print) -> dict[str, Any]:
    """Measure every target; the full report as a dict."""
    if cfg.import_only:
        asyncio.run(measure.settle(max_wait_s=cfg.settle_max_s))
        figures = {"client_import_s": _client_imports(cfg, log)}
        return {
            "figures": figures,
            "config": asdict(cfg),
            "notes": {
                "client_import_s": CLIENT_IMPORT_NOTE,
                "load_average": "1/5/15-minute load average when the run ended: " + _load_average(),
            },
            "goals": check_goals(figures),
        }
    sessions_needed = 16 + max(
        cfg.max_probe, cfg.idle_episodes, cfg.grpo_clients, cfg.burst_clients
    )
    burst_server = {"analyst_env": lambda: analyst_server(sessions_needed, BURST_SERVER_ENV)}
    if cfg.burst_only:  # one server is enough: the one the bursts need
        burst_server = {}
    servers = {
        "analyst_env": lambda: analyst_server(
            sessions_needed, BURST_SERVER_ENV if cfg.burst_only else None
        ),
        "jupyter_kernel": lambda: baseline_server(
            "jupyter_app", sessions_needed, _task_csv(cfg.task_id)
        ),
        "protocol_floor": lambda: baseline_server("floor_app", sessions_needed, None),
    }
    per_target: dict[str, dict[str, float | None]] = {}
    for target in TARGETS:
        if target == "jupyter_kernel" and (cfg.burst_only or not cfg.include_jupyter):
            continue
        log(f"measuring {target} ...")
        # the cold start and the import are timed on a quiet machine too
        asyncio.run(measure.settle(max_wait_s=cfg.settle_max_s))
        with servers[target]() as server:
            per_target[target] = _measure_target(server, cfg, target, burst_server.get(target))
        asyncio.run(measure.settle(max_wait_s=cfg.settle_max_s))
        if not cfg.burst_only:
            per_target[target]["client_import_s"] = import_time_s(
                CLIENT_IMPORTS[target], runs=cfg.import_runs
            )
    if not cfg.burst_only:
        log("measuring the trivial cell of analyst_env and protocol_floor in turn ...")
        asyncio.run(measure.settle(max_wait_s=cfg.settle_max_s))
        with servers["analyst_env"]() as ours, servers["protocol_floor"]() as floor:
            in_turn = asyncio.run(
                paired.steps_in_turn(
                    {
                        "analyst_env": ours.ws_url,
                        "protocol_floor": floor.ws_url,
                    },
                    cfg.reset_frame,
                    cfg.paired_blocks,
                    cfg.paired_steps,
                )
            )
        for target, p50 in in_turn.items():
            per_target[target]["step_p50_in_turn_ms"] = p50
    names = list(next(iter(per_target.values())))
    figures = {name: {t: per_target.get(t, {}).get(name) for t in TARGETS} for name in names}
    if "describe_p50_ms" in figures:
        figures["describe_p50_ms"]["protocol_floor"] = None
    report: dict[str, Any] = {
        "figures": figures,
        "config": asdict(cfg),
        "notes": {
            "jupyter_kernel": f"samples capped for time: {cfg.jupyter_n_reset} resets, "
            f"{cfg.jupyter_idle_episodes} idle episodes, concurrency probed up to "
            f"{cfg.jupyter_max_probe}",
            "max_concurrent": f"probed up to {cfg.max_probe} (analyst_env, protocol_floor)",
            "burst": "analyst_env on a server of its own with "
            + " ".join(f"{k}={v}" for k, v in BURST_SERVER_ENV.items())
            + f"; {cfg.burst_clients} sessions at once: resets sent together, then one trivial "
            f"cell each, sent together once all resets answered (burst_first_step), then "
            f"{cfg.burst_rounds} more each, back to back, then (machine quiet again) "
            "all reset together once more (burst_again); the client is one asyncio process on "
            "the same machine",
            "load_average": "1/5/15-minute load average when the run ended: " + _load_average(),
            "client_import_s": CLIENT_IMPORT_NOTE,
            "step_p50_in_turn_ms": f"a `1+1` cell on analyst_env and the protocol floor, both "
            f"servers up, stepped in turn: {cfg.paired_blocks} rounds of {cfg.paired_steps} "
            "steps each, the order flipped every round; the median over rounds of each "
            "round's p50 (the ratio goal reads these: both under the same machine state)",
        },
    }
    if not cfg.burst_only and cfg.worker_counts:
        report["workers"] = _worker_figures(cfg, log)
        report["notes"]["workers"] = (
            f"analyst-env serve --workers N, {cfg.worker_clients} sessions at once, "
            f"{cfg.worker_rounds} rounds of (all reset together, then one trivial cell each); "
            "the client is one asyncio process on the same cores"
        )
    report["goals"] = check_goals(figures)
    return report


def _worker_figures(cfg: BenchConfig, log) -> dict[str, dict[str, float]]:
    """Resets/s, steps/s and step p99 of analyst_env for each of ``cfg.worker_counts``."""
    out = {}
    reset = cfg.reset_frame
    for workers in cfg.worker_counts:
        log(f"measuring analyst_env with --workers {workers} ...")
        asyncio.run(measure.settle(max_wait_s=cfg.settle_max_s))
        with analyst_server(16 + cfg.worker_clients, workers=workers) as server:
            ws_url = server.ws_url
            out[str(workers)] = asyncio.run(
                measure.throughput(ws_url, reset, cfg.worker_clients, cfg.worker_rounds)
            )
    return out


def _load_average() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None


def check_goals(f: dict[str, dict[str, float | None]]) -> list[dict[str, Any]]:
    """The sandbox work's goals, each with the measured value and a verdict."""
    ours = {k: v["analyst_env"] for k, v in f.items()}
    jup = {k: v["jupyter_kernel"] for k, v in f.items()}
    floor = {k: v["protocol_floor"] for k, v in f.items()}
    client_import = _at_most(
        "client import: `import analyst_env.client` <= 0.5 s", ours.get("client_import_s"), 0.5
    )
    if "burst_reset_p99_ms" not in ours:  # an import-only run
        return [{"goal": client_import[0], "value": client_import[1], "met": client_import[2]}]
    burst = [
        _at_most("burst reset p99 <= 1 s (256 at once)", ours["burst_reset_p99_ms"], 1000),
        _at_most(
            "burst reset p99 <= 1 s, the next burst (pool sized by the first)",
            ours["burst_again_reset_p99_ms"],
            1000,
        ),
        _at_most("256-client trivial-step p99 <= 50 ms", ours["burst_step_p99_ms"], 50),
    ]
    if "reset_p50_ms" not in ours:  # a burst-only run
        return [{"goal": name, "value": value, "met": ok} for name, value, ok in burst]
    reset_ratio = _ratio(jup["reset_p50_ms"], ours["reset_p50_ms"])
    step_ratio = _ratio(ours["step_p50_ms"], floor["step_p50_ms"])
    in_turn_ratio = _ratio(ours.get("step_p50_in_turn_ms"), floor.get("step_p50_in_turn_ms"))
    grpo_ratio = _ratio(jup["grpo_batch_s"], ours["grpo_batch_s"])
    goals = burst + [
        _at_most("reset p50 <= 10 ms", ours["reset_p50_ms"], 10),
        _at_least("reset >= 80x faster than a Jupyter kernel", reset_ratio, 80),
        _at_most("trivial cell p50 <= 2 ms", ours["step_p50_ms"], 2),
        _at_most("trivial cell <= 1.5x the protocol floor", step_ratio, 1.5),
        _at_most("trivial cell <= 3x the protocol floor, stepped in turn", in_turn_ratio, 3),
        _at_most("idle PSS <= 15 MiB per episode", ours["idle_pss_mib"], 15),
        _at_least(">= 500 concurrent live episodes", ours["max_concurrent"], 500),
        _at_least("GRPO batch >= 20x faster than Jupyter", grpo_ratio, 20),
        _at_most("serve healthy <= 3 s", ours["serve_cold_start_s"], 3),
        client_import,
    ]
    return [{"goal": name, "value": value, "met": ok} for name, value, ok in goals]


Goal = tuple[str, float | None, bool | None]
"""A goal's wording, the measured figure, and whether it is met (None: no figure, no verdict)."""


def _at_most(goal: str, value: float | None, limit: float) -> Goal:
    """``goal``, met when the figure is within ``limit``."""
    return goal, value, None if value is None else value <= limit


def _at_least(goal: str, value: float | None, limit: float) -> Goal:
    """``goal``, met when the figure reaches ``limit``."""
    return goal, value, None if value is None else value >= limit


def format_markdown(report: dict[str, Any]) -> str:
    def cell(v: Any) -> str:
        if v is None:
            return "–"
        return f"{v:.0f}" if isinstance(v, int) or abs(v) >= 100 else f"{v:.2f}"

    lines = ["| figure | analyst_env | jupyter_kernel | protocol_floor |", "|---|---|---|---|"]
    for name, row in report["figures"].items():
        lines.append(f"| {name} | " + " | ".join(cell(row[t]) for t in TARGETS) + " |")
    lines += ["", "| goal | measured | met |", "|---|---|---|"]
    for g in report["goals"]:
        met = "–" if g["met"] is None else ("yes" if g["met"] else "**no**")
        lines.append(f"| {g['goal']} | {cell(g['value'])} | {met} |")
    if report.get("workers"):
        lines += ["", "| `--workers` | resets/s | steps/s | step p99 ms |", "|---|---|---|---|"]
        for workers, row in report["workers"].items():
            lines.append(
                f"| {workers} | {cell(row['resets_per_s'])} | {cell(row['steps_per_s'])} "
                f"| {cell(row['step_p99_ms'])} |"
            )
    return "\n".join(lines)
