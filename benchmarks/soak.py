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
"""

from __future__ import annotations

import asyncio
import glob
import json
import os
import random
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import websockets

from analyst_env.benchmarks.servers import ServerProcess, process_tree
from analyst_env.client.resume import Backoff, EpisodeLostError, ResumeTicket, resume_episode

TASK_ID = "starter-sales-000"
CELL_TIMEOUT_S = 2.0
RESUME_GRACE_S = 5.0
REPLY_TIMEOUT_S = 60.0


@dataclass
class SoakConfig:
    sessions: int = 100
    minutes: float = 10.0
    seed: int = 0
    max_rss_growth_pct: float = 5.0
    steps_per_episode: int = 12
    settle_s: float = 30.0  # longest wait for torn-down episodes to release what they held
    warm_up_s: float | None = None  # None: a tenth of the run, 10 s to 60 s
    rss_sample_s: float = 15.0  # how often the main process's RSS is recorded

    def warm_up_seconds(self) -> float:
        if self.warm_up_s is not None:
            return self.warm_up_s
        return min(60.0, max(10.0, 6.0 * self.minutes))


@dataclass
class Tally:
    """What the clients did and saw."""

    episodes: int = 0
    frames: int = 0
    actions: dict[str, int] = field(default_factory=dict)
    unanswered: int = 0
    problems: list[str] = field(default_factory=list)

    def did(self, action: str) -> None:
        self.actions[action] = self.actions.get(action, 0) + 1

    def problem(self, text: str) -> None:
        self.unanswered += 1
        if len(self.problems) < 20:
            self.problems.append(text)


def _step(tool: str, **arguments: Any) -> str:
    return json.dumps(
        {"type": "step", "data": {"type": "call_tool", "tool_name": tool, "arguments": arguments}}
    )


def _cell(code: str) -> str:
    return _step("add_and_execute_code_cell", code=code)


#: Actions that keep the connection: (name, frame). Every one must get a reply frame.
ACTIONS: list[tuple[str, Any]] = [
    ("trivial_cell", _cell("1 + 1")),
    ("pandas_cell", _cell("import pandas as pd\npd.read_csv('sales.csv').describe()")),
    ("list_files", _step("list_files")),
    ("notebook_state", _step("get_notebook_state")),
    ("shell", _step("execute_shell_command", command="ls -la")),
    ("state", json.dumps({"type": "state"})),
    ("crash_cell", _cell("raise RuntimeError('boom')")),
    ("kill_kernel_cell", _cell("import os\nos._exit(3)")),
    ("loop_cell", _cell("while True:\n    pass")),
    ("memory_cell", _cell("blocks = []\nwhile True:\n    blocks.append(bytearray(64 * 2**20))")),
    ("unknown_tool", _step("no_such_tool")),
    ("wrong_arguments", _step("add_and_execute_code_cell", code=7, extra=True)),
    ("malformed_json", "{not json"),
    ("json_array", "[1, 2, 3]"),
    ("unknown_type", json.dumps({"type": "teleport"})),
    ("binary_frame", b"\x00\x01binary"),
    ("deep_nesting", "[" * 5000 + "]" * 5000),
    ("huge_seed_reset", '{"type": "reset", "data": {"seed": 1' + "0" * 5000 + "}}"),
]
#: Actions that end or cut the connection.
CUTS = ("drop_and_resume", "drop_for_good", "close")


def snapshot(server: ServerProcess) -> dict[str, Any]:
    """What the server holds now."""
    pids = process_tree(server.running.pid)
    fds = 0
    for pid in pids:
        try:
            fds += len(os.listdir(f"/proc/{pid}/fd"))
        except OSError:
            pass
    with open("/proc/self/mountinfo") as fh:
        mounts = sum(1 for _ in fh)
    pattern = f"/sys/fs/cgroup/**/analyst-env-{server.running.pid}-*"
    cgroups = len(glob.glob(pattern, recursive=True))
    scratch = len(glob.glob(os.path.join(server.env["TMPDIR"], "analyst-env-local-*")))
    return {
        "processes": len(pids),
        "fds": fds,
        "rss_mib": rss_mib(server),
        "mounts": mounts,
        "cgroups": cgroups,
        "scratch_dirs": scratch,
    }


def rss_mib(server: ServerProcess) -> float:
    """The server's main process's resident memory, in MiB."""
    with open(f"/proc/{server.running.pid}/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmRSS:")) / 1024


async def _reply(ws) -> dict[str, Any]:
    return json.loads(await asyncio.wait_for(ws.recv(), timeout=REPLY_TIMEOUT_S))


async def _episode(
    ws_url: str, rng: random.Random, cfg: SoakConfig, tally: Tally, deadline: float
) -> None:
    """One episode of random actions (one socket, resumed as often as it is dropped)."""
    ws = await websockets.connect(
        f"{ws_url}?resume=1", max_size=None, ping_interval=None, open_timeout=REPLY_TIMEOUT_S
    )
    cut_off = False
    try:
        try:
            await ws.send(json.dumps({"type": "reset", "data": {"task_id": TASK_ID}}))
        except websockets.ConnectionClosed:
            pass  # refused (error frame, then close): the frame is still queued
        first = await _reply(ws)
        if (first.get("data") or {}).get("code") == "CAPACITY_REACHED":
            tally.did("refused_at_capacity")  # a clear refusal, not a fault
            cut_off = True
            await asyncio.sleep(0.5)
            return
        if first.get("type") != "observation":
            tally.problem(f"reset failed: {str(first)[:200]}")
            return
        tally.episodes += 1
        meta = first["data"].get("metadata") or {}
        episode_id = first["data"]["observation"]["episode_id"]
        secret, steps_seen = meta.get("resume_secret"), 0
        if not isinstance(secret, str):  # asked for with ?resume=1: without it no cut can resume
            tally.problem(f"reset reply without a resume_secret: {str(first)[:200]}")
            return
        for _ in range(cfg.steps_per_episode):
            if time.monotonic() > deadline:
                break
            if rng.random() < 0.12:
                cut = rng.choice(CUTS)
                tally.did(cut)
                if cut == "close":
                    break
                if cut == "drop_for_good":  # parked, then closed when the grace period ends
                    ws.transport.abort()
                    cut_off = True
                    return
                await ws.send(_cell("import time\ntime.sleep(0.3)\n'resumed'"))
                ws.transport.abort()  # mid-step
                resumed = await _resume(ws_url, episode_id, secret, steps_seen, tally)
                if resumed is None:
                    cut_off = True
                    return
                ws, ran = resumed
                steps_seen += ran
                continue
            name, frame = rng.choice(ACTIONS)
            tally.did(name)
            await ws.send(frame)
            try:
                reply = await _reply(ws)
            except (TimeoutError, websockets.ConnectionClosed) as exc:
                tally.problem(f"{name}: no reply ({exc!r})")
                return
            tally.frames += 1
            if name.startswith(
                (
                    "trivial",
                    "pandas",
                    "list",
                    "notebook",
                    "shell",
                    "crash",
                    "kill",
                    "loop",
                    "memory",
                    "unknown_tool",
                    "wrong",
                )
            ):
                steps_seen += 1
            if name == "huge_seed_reset" and reply.get("type") == "observation":
                tally.problem("a reset with a 5000-digit seed was accepted")
    finally:
        if not cut_off:
            try:
                await ws.send(json.dumps({"type": "close"}))
                await asyncio.wait_for(ws.close(), timeout=5)
            except (TimeoutError, websockets.ConnectionClosed, OSError):
                ws.transport.abort()


async def _resume(ws_url: str, episode_id: str, secret: str, seen: int, tally: Tally):
    """(socket resumed on the episode, whether the cut step's reply came first), or None."""
    ticket = ResumeTicket(episode_id, secret, RESUME_GRACE_S, seen)
    try:
        ws, missed = await resume_episode(
            ws_url,
            ticket,
            {"max_size": None, "ping_interval": None},
            time.monotonic(),
            Backoff(),
            REPLY_TIMEOUT_S,
        )
    except EpisodeLostError as exc:
        tally.problem(f"resume failed: {exc}")
        return None
    # No missed reply: the step frame died with the aborted connection before reaching the server.
    tally.did("resumed_with_missed_reply" if missed is not None else "resumed_step_never_arrived")
    return ws, missed is not None


async def _client(
    ws_url: str, rng: random.Random, cfg: SoakConfig, tally: Tally, deadline: float
) -> None:
    while time.monotonic() < deadline:
        try:
            await _episode(ws_url, rng, cfg, tally, deadline)
        except (
            TimeoutError,
            OSError,
            websockets.ConnectionClosed,
            websockets.InvalidHandshake,
        ) as exc:
            tally.problem(f"connection failed: {exc!r}")


def _clients(
    ws_url: str, rng: random.Random, cfg: SoakConfig, tally: Tally, seconds: float
) -> None:
    """Run ``cfg.sessions`` random clients for ``seconds``."""
    deadline = time.monotonic() + seconds

    async def run() -> None:
        await asyncio.gather(
            *(
                _client(ws_url, random.Random(rng.random()), cfg, tally, deadline)
                for _ in range(cfg.sessions)
            )
        )

    asyncio.run(run())


class _RssSampler:
    """Records the server's RSS every ``period_s`` on a thread, to tell a plateau from a leak."""

    def __init__(self, server: ServerProcess, period_s: float) -> None:
        self.samples: list[tuple[float, float]] = []
        self._server, self._period_s = server, period_s
        self._stop = threading.Event()
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="soak-rss", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._period_s):
            self.samples.append(
                (round(time.monotonic() - self._started, 1), round(rss_mib(self._server), 1))
            )

    def stop(self) -> list[tuple[float, float]]:
        self._stop.set()
        self._thread.join()
        return self.samples


def _settle(server: ServerProcess, baseline: dict[str, Any], wait_s: float) -> dict[str, Any]:
    """The snapshot once the counts are back to the baseline, or after ``wait_s``."""
    deadline = time.monotonic() + wait_s
    while True:
        now = snapshot(server)
        back = all(
            now[k] <= baseline[k] for k in ("processes", "fds", "mounts", "cgroups", "scratch_dirs")
        )
        if back or time.monotonic() > deadline:
            return now
        time.sleep(0.5)


def run_soak(cfg: SoakConfig, log=print) -> dict[str, Any]:
    """Run the soak; the report as a dict (``ok`` False past a threshold)."""
    exe = str(Path(sys.executable).with_name("analyst-env"))
    argv = [
        exe,
        "serve",
        "--port",
        "{port}",
        "--max-sessions",
        str(2 * cfg.sessions + 16),
        "--cell-timeout",
        str(CELL_TIMEOUT_S),
        "--workers",
        "1",  # the RSS watched is one server process's
        "--log-level",
        "warning",
    ]
    # dropped-for-good episodes hold a slot for the grace period: twice the sessions
    scratch = tempfile.TemporaryDirectory(prefix="analyst-env-soak-")
    env = {"ANALYST_ENV_RESUME_GRACE_S": str(RESUME_GRACE_S), "TMPDIR": scratch.name}
    rng = random.Random(cfg.seed)
    tally = Tally()
    with scratch, ServerProcess(argv, env=env) as server:
        ws_url = server.url.replace("http://", "ws://") + "/ws"
        warm_up_s = cfg.warm_up_seconds()
        idle = snapshot(server)
        log(f"warming up {cfg.sessions} sessions for {warm_up_s:g} s ...")
        _clients(ws_url, rng, cfg, tally, warm_up_s)
        _settle(server, idle, cfg.settle_s + RESUME_GRACE_S)  # the warm-up's episodes end
        baseline = snapshot(server)
        log(f"baseline: {baseline}; soaking for {cfg.minutes:g} min ...")
        warm_episodes = tally.episodes
        started = time.monotonic()
        sampler = _RssSampler(server, cfg.rss_sample_s)
        _clients(ws_url, rng, cfg, tally, cfg.minutes * 60)
        samples = sampler.stop()
        elapsed = time.monotonic() - started
        log("closing; waiting for episodes to be torn down ...")
        end = _settle(server, baseline, cfg.settle_s + RESUME_GRACE_S)
        alive = server.running.poll() is None
    leaks = {
        k: end[k] - baseline[k] for k in ("processes", "fds", "mounts", "cgroups", "scratch_dirs")
    }
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
