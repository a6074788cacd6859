"""``analyst-env soak``: many sessions doing random valid and invalid things, then a leak check.

Trainers hold thousands of sessions for hours. The soak starts a real ``analyst-env
serve`` process, warms it up with one episode per session, takes a snapshot of what
the server holds (processes of its tree, open fds, the main process's RSS, mounts,
cgroups, the backend's scratch directories), and then runs ``--sessions`` clients for
``--minutes``. Each client plays episodes made of random actions: valid cells, SQL,
file listings, and everything a clumsy or hostile client does (binary and malformed
frames, unknown tools and wrong arguments, cells that crash the kernel, loop past the
cell timeout or eat memory, connections dropped mid-step and resumed, or dropped for
good). Every frame must get a reply; a client that gets none counts as a failure.

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
    pids = process_tree(server.proc.pid)
    fds = 0
    for pid in pids:
        try:
            fds += len(os.listdir(f"/proc/{pid}/fd"))
        except OSError:
            pass
    with open(f"/proc/{server.proc.pid}/status") as fh:
        rss_kib = next(int(line.split()[1]) for line in fh if line.startswith("VmRSS:"))
    with open("/proc/self/mountinfo") as fh:
        mounts = sum(1 for _ in fh)
    cgroups = len(glob.glob("/sys/fs/cgroup/**/analyst*", recursive=True))
    scratch = len(glob.glob(os.path.join(tempfile.gettempdir(), "analyst-env-local-*")))
    return {
        "processes": len(pids),
        "fds": fds,
        "rss_mib": rss_kib / 1024,
        "mounts": mounts,
        "cgroups": cgroups,
        "scratch_dirs": scratch,
    }


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


async def _warm_up(ws_url: str, sessions: int) -> None:
    """One short episode per client, so the baseline includes what a full server keeps warm."""

    async def one() -> None:
        async with websockets.connect(ws_url, max_size=None, ping_interval=None) as ws:
            await ws.send(json.dumps({"type": "reset", "data": {"task_id": TASK_ID}}))
            await _reply(ws)
            await ws.send(_cell("1 + 1"))
            await _reply(ws)

    await asyncio.gather(*(one() for _ in range(sessions)))


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
        "--log-level",
        "warning",
    ]
    # dropped-for-good episodes hold a slot for the grace period: twice the sessions
    env = {"ANALYST_ENV_RESUME_GRACE_S": str(RESUME_GRACE_S)}
    rng = random.Random(cfg.seed)
    tally = Tally()
    with ServerProcess(argv, env=env) as server:
        ws_url = server.url.replace("http://", "ws://") + "/ws"
        log(f"warming up {cfg.sessions} sessions ...")
        asyncio.run(_warm_up(ws_url, cfg.sessions))
        time.sleep(3.0)  # the warm-up's episodes are torn down
        baseline = snapshot(server)
        log(f"baseline: {baseline}; soaking for {cfg.minutes:g} min ...")
        started = time.monotonic()
        deadline = started + cfg.minutes * 60

        async def soak() -> None:
            await asyncio.gather(
                *(
                    _client(ws_url, random.Random(rng.random()), cfg, tally, deadline)
                    for _ in range(cfg.sessions)
                )
            )

        asyncio.run(soak())
        elapsed = time.monotonic() - started
        log("closing; waiting for episodes to be torn down ...")
        end = _settle(server, baseline, cfg.settle_s + RESUME_GRACE_S)
        alive = server.proc.poll() is None
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
        "episodes": tally.episodes,
        "frames_answered": tally.frames,
        "actions": dict(sorted(tally.actions.items())),
        "problems": tally.problems,
        "baseline": baseline,
        "end": end,
        "leaks": leaks,
        "rss_growth_pct": growth,
        "load_average": " ".join(f"{x:.2f}" for x in os.getloadavg()),
    }
