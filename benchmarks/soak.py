"""``analyst-env soak``: many sessions doing random valid and invalid things, then a leak check.

Trainers hold thousands of sessions for hours. The soak starts a real ``analyst-env
serve`` process and runs ``--sessions`` clients on it: first for a warm-up (a tenth of
the run, 10 s to 60 s), then for ``--minutes``. Between the two it takes a snapshot of
what the server holds (processes of its tree, open fds, the main process's RSS, mounts,
the cgroups its backend named after its pid, the scratch directories in a temporary
directory of its own: other servers on the machine do not count). The warm-up plays the same random
actions as the soak: what the first of each kind loads once (a scorer's module, the
allocator's arenas at full concurrency) belongs to the baseline, and what grows after
it is what a long run would keep growing (``rss_mib_samples`` shows which: a plateau
or a slope). Each client plays episodes made of random actions: valid cells, SQL, file
listings, and everything a clumsy or hostile client does (binary and malformed frames,
unknown tools and wrong arguments, cells that crash the kernel, loop past the cell
timeout or eat memory, connections dropped mid-step and resumed, or dropped for good).
Every frame must get a reply; a client that gets none counts as a failure.

At the end all clients close, the server gets time to tear episodes down, and the
snapshot is taken again. The report lists the differences; the command exits 1 if
any frame went unanswered, anything leaked, or RSS grew more than the threshold.
The clients are :mod:`~analyst_env.benchmarks.soak_clients`; the counts are
:mod:`~analyst_env.benchmarks.soak_snapshot`.
"""

from __future__ import annotations

import os
import random
import tempfile
import time
from dataclasses import asdict, dataclass
from typing import Any

from analyst_env.benchmarks.servers import analyst_server
from analyst_env.benchmarks.soak_clients import RESUME_GRACE_S, Tally, run_clients
from analyst_env.benchmarks.soak_snapshot import LEAK_COUNTS, RssSampler, settle, snapshot

CELL_TIMEOUT_S = 2.0


@dataclass
class SoakConfig:
    sessions: int = 100
    minutes: float = 10.0
    seed: int = 0
    max_rss_growth_pct: float = 5.0
    steps_per_episode: int = 12
    settle_s: float = 30.0  # longest wait for torn-down episodes to release what they held
    warm_up_s: float | None = None  # None: a tenth of the run, 10 s to 60 s; 0: none
    rss_sample_s: float = 15.0  # how often the main process's RSS is recorded

    def warm_up_seconds(self) -> float:
        if self.warm_up_s is not None:
            return self.warm_up_s
        return min(60.0, max(10.0, 6.0 * self.minutes))


def run_soak(cfg: SoakConfig, log=print) -> dict[str, Any]:
    """Run the soak; the report as a dict (``ok`` False past a threshold)."""
    scratch = tempfile.TemporaryDirectory(prefix="analyst-env-soak-")
    env = {"ANALYST_ENV_RESUME_GRACE_S": str(RESUME_GRACE_S), "TMPDIR": scratch.name}
    server_process = analyst_server(
        # dropped-for-good episodes hold a slot for the grace period: twice the sessions
        2 * cfg.sessions + 16,
        env,
        workers=1,  # the RSS watched is one server process's
        flags=("--cell-timeout", str(CELL_TIMEOUT_S)),
    )
    rng = random.Random(cfg.seed)
    tally = Tally()
    with scratch, server_process as server:
        ws_url = server.ws_url
        warm_up_s = cfg.warm_up_seconds()
        baseline = snapshot(server)
        if warm_up_s > 0:
            log(f"warming up {cfg.sessions} sessions for {warm_up_s:g} s ...")
            run_clients(ws_url, rng, cfg.sessions, cfg.steps_per_episode, tally, warm_up_s)
            settle(server, baseline, cfg.settle_s + RESUME_GRACE_S)  # the warm-up's episodes end
            baseline = snapshot(server)
        log(f"baseline: {baseline}; soaking for {cfg.minutes:g} min ...")
        warm_episodes = tally.episodes
        started = time.monotonic()
        sampler = RssSampler(server, cfg.rss_sample_s)
        run_clients(ws_url, rng, cfg.sessions, cfg.steps_per_episode, tally, cfg.minutes * 60)
        samples = sampler.stop()
        elapsed = time.monotonic() - started
        log("closing; waiting for episodes to be torn down ...")
        end = settle(server, baseline, cfg.settle_s + RESUME_GRACE_S)
        alive = server.running.poll() is None
    leaks = {k: end[k] - baseline[k] for k in LEAK_COUNTS}
    growth = 100 * (end["rss_mib"] - baseline["rss_mib"]) / baseline["rss_mib"]
    failures = [f"{k}: {v:+d}" for k, v in leaks.items() if v > 0]
    if growth > cfg.max_rss_growth_pct:
        failures.append(f"RSS grew {growth:.1f} % (> {cfg.max_rss_growth_pct:g} %)")
    if tally.unanswered:
        failures.append(f"{tally.unanswered} frame(s) or connection(s) without a reply")
    if not alive:
        failures.append("the server died")
    return {
        "ok": not failures,
        "failures": failures,
        "config": asdict(cfg),
        "elapsed_s": elapsed,
        "episodes": tally.episodes - warm_episodes,
        "warm_up": {"seconds": warm_up_s, "episodes": warm_episodes},
        "frames_answered": tally.frames,
        "actions": dict(sorted(tally.actions.items())),
        "problems": tally.problems,
        "baseline": baseline,
        "end": end,
        "leaks": leaks,
        "rss_growth_pct": growth,
        # (seconds into the soak, MiB) while the clients run: flat after a rise is a plateau
        "rss_mib_samples": samples,
        "rss_growth_second_half_pct": _second_half_growth(samples),
        "load_average": " ".join(f"{x:.2f}" for x in os.getloadavg()),
    }


def _second_half_growth(samples: list[tuple[float, float]]) -> float | None:
    """RSS growth from the sample at mid-run to the last one, in percent (None: too few)."""
    if len(samples) < 4:
        return None
    middle, last = samples[len(samples) // 2][1], samples[-1][1]
    return round(100 * (last - middle) / middle, 2)
