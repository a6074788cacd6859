"""Test data and helpers shared by several test modules: a tiny dataset whose answers are
known by construction, process checks, a live procedural server."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from analyst_env.task_format import Dataset, Task, VerifierSpec

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATASETS = REPO_ROOT.parent / "shared" / "datasets"

# A distinctive gold value: if it ever shows up in an observation or state, that is a leak.
SECRET_TOTAL = 7319.25


def make_tiny_dataset(root: Path) -> Dataset:
    """Three small tasks (CSV, SQLite, Excel) plus hook tasks, with answers known by
    construction."""
    root.mkdir(parents=True, exist_ok=True)
    sales = pd.DataFrame(
        {
            "region": ["north", "south", "north", "east", "south"],
            "amount": [1000.0, 2500.25, 1819.0, 1000.0, 1000.0],
        }
    )
    assert sales.amount.sum() == SECRET_TOTAL
    sales.to_csv(root / "sales.csv", index=False)
    with sqlite3.connect(root / "shop.sqlite") as con:
        con.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, customer TEXT, qty INTEGER)")
        con.executemany(
            "INSERT INTO orders VALUES (?, ?, ?)", [(1, "ann", 3), (2, "bob", 4), (3, "ann", 6)]
        )
    with pd.ExcelWriter(root / "staff.xlsx") as xl:
        pd.DataFrame({"name": ["a", "b", "c"], "dept": ["x", "y", "x"]}).to_excel(
            xl, sheet_name="people", index=False
        )
        pd.DataFrame({"dept": ["x", "y"], "budget": [10, 20]}).to_excel(
            xl, sheet_name="depts", index=False
        )
    numeric = VerifierSpec(name="numeric", params={"abs_tol": 1e-6})
    tasks = [
        Task(
            id="tiny-csv",
            instruction="What is the total amount in sales.csv? Answer with the number.",
            files={"sales.csv": str(root / "sales.csv")},
            answer=SECRET_TOTAL,
            oracle_answer=str(SECRET_TOTAL),
            verifier=numeric,
            max_steps=8,
            split="train",
            metadata={"kind": "csv"},
        ),
        Task(
            id="tiny-sqlite",
            instruction="How many items did customer ann order in total (shop.sqlite)?",
            files={"shop.sqlite": str(root / "shop.sqlite")},
            answer=9,
            oracle_answer="9",
            verifier=numeric,
            split="train",
            metadata={"kind": "sqlite"},
        ),
        Task(
            id="tiny-excel",
            instruction="What is the budget of the department of employee b (staff.xlsx)?",
            files={"staff.xlsx": str(root / "staff.xlsx")},
            answer=20,
            oracle_answer="20",
            verifier=numeric,
            split="test",
            metadata={"kind": "excel"},
        ),
        Task(
            id="tiny-verify-hooks",
            instruction="Write anything to out.txt, then submit 'done'.",
            files={"sales.csv": str(root / "sales.csv")},
            answer="done",
            oracle_answer="done",
            verifier=VerifierSpec(name="exact"),
            setup=["echo prepared > setup_marker.txt"],
            verify=[
                "test -f setup_marker.txt",
                "grep -q done logs/verifier/answer.txt",
                "test -f out.txt",
            ],
            split="test",
        ),
        Task(
            id="tiny-reward-file",
            instruction="Submit anything.",
            files={},
            answer="x",
            oracle_answer="x",
            verifier=VerifierSpec(name="exact"),
            verify=["echo 0.25 > logs/verifier/reward.txt"],
            split="test",
        ),
        Task(
            id="tiny-bad-setup",
            instruction="Setup of this task fails.",
            files={},
            answer="x",
            oracle_answer="x",
            verifier=VerifierSpec(name="exact"),
            setup=["exit 3"],
            split="test",
        ),
    ]
    return Dataset(name="tiny", tasks=tasks)


def alive(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):  # gone, or exiting while read
        return False


def wait_dead(pid: int, timeout_s: float = 5.0) -> bool:
    """Wait until ``pid`` is gone or a zombie; False if it still runs after ``timeout_s``."""
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.02)
    return False


PID_NAMESPACE_OF_CELL = "__import__('os').readlink('/proc/self/ns/pid')"
"""A cell expression giving the kernel's PID namespace (``pid:[inode]``), for ``host_pid``."""


def host_pid(namespace: str, pid: int) -> int:
    """The host pid of the process numbered ``pid`` in PID namespace ``namespace``.

    Kernels live in their zygote's own PID namespace, so a pid a cell prints is
    not the number the host (the test) sees; this finds the host's number by
    matching each host process's namespace and the innermost ``NSpid`` entry.

    Raises:
        LookupError: No live process matches.
    """
    import os

    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.readlink(f"/proc/{entry}/ns/pid") != namespace:
                continue
            with open(f"/proc/{entry}/status") as f:
                nspid = next(line for line in f if line.startswith("NSpid:")).split()[1:]
        except (OSError, StopIteration):
            continue
        if int(nspid[-1]) == pid:
            return int(entry)
    raise LookupError(f"no process {pid} in {namespace}")


def call(env, tool: str, **arguments):
    """One tool step on an in-process ``AnalystEnvironment``."""
    from analyst_env.models import CallToolAction

    return env.step(CallToolAction(tool_name=tool, arguments=arguments))


def code_step(source: str) -> dict:
    """The ``/ws`` step frame that runs ``source`` as a new notebook cell."""
    return {
        "type": "step",
        "data": {
            "type": "call_tool",
            "tool_name": "add_and_execute_code_cell",
            "arguments": {"code": source},
        },
    }


@contextlib.contextmanager
def procedural_server(cache: Path, seed: int, max_sessions: int) -> Iterator[tuple[str, Any]]:
    """A live server of ``procedural:SEED`` whose task cache is ``cache``; yields (url, runtime).

    The cache is set through ``ANALYST_ENV_CACHE`` for the server's life, so kernels find it
    hidden as they find the default cache.
    """
    from analyst_env.server.app import build_app
    from analyst_env.server.local_server import BackgroundServer
    from analyst_env.server.settings import Settings

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ANALYST_ENV_CACHE", str(cache))
        app = build_app(Settings(dataset=f"procedural:{seed}", max_sessions=max_sessions))
        with BackgroundServer(app) as url:
            yield url, app.state.runtime


@contextlib.contextmanager
def curriculum_server(root: Path, seed: int = 7, sessions: int = 8) -> Iterator[str]:
    """A live server of ``procedural:SEED`` with ``--curriculum 0.5``, its state and task cache
    under ``root``; yields its URL."""
    from analyst_env.server.local_server import serving
    from analyst_env.server.settings import Settings

    settings = Settings.from_env(
        {
            "ANALYST_ENV_DATASET": f"procedural:{seed}",
            "ANALYST_ENV_CURRICULUM": "0.5",
            "ANALYST_ENV_STATE_DIR": str(root / "state"),
            "ANALYST_ENV_CACHE": str(root / "cache"),
        }
    )
    with serving(settings, sessions=sessions) as url:
        yield url
