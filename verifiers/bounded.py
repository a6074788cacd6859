"""Run a scorer in another process with memory, CPU-time and wall-time limits.

Scoring reads what the agent produced: answer text, and files such as a
``result.xlsx`` or an output CSV. A 200,000-row workbook costs openpyxl half a
minute and most of a gigabyte; a SQL answer can fetch gigabytes of blobs. Run
in the server's process, that is the server's CPU and memory, and an exception
there used to leave the episode open. Here the scorer runs in a process with
``RLIMIT_DATA`` and ``RLIMIT_CPU`` set, and the server kills it at the
wall-time limit. Whatever goes wrong (a limit, a crash, an exception) is a
``Verdict`` of 0.0 whose detail says what happened; this module never raises.

**Short text answers are scored in process.** A fork costs ~23 ms (the
server's heap is mapped and torn down), against ~0.01 ms to score a number; in
a GRPO batch of 64 answers on two cores that was the difference. The text
scorers of :data:`IN_PROCESS_SCORERS` read nothing but the answer and the gold,
and their parsers are linear (``tests/verifiers/test_reward_hacking.py``
holds each to well under a second on the nastiest 64 KiB answers), so an
answer of at most ``ScoringLimits.in_process_max_bytes`` (1 KiB) costs them
at most a few milliseconds and kilobytes: it is scored in the server's
process.

**Every other scoring goes to a long-lived worker.** A scoring worker
(``verifiers/score_pool.py``, ``verifiers/score_worker.py``) is a clean
interpreter with the scorers imported, scoring one answer at a time under the
same limits, and replaced after any failure or limit; it costs no fork of the
server per answer and inherits none of its locks. A scorer the worker does not
have under the same ``module:qualname`` (one registered or replaced at run
time in this process, a test's), and any scoring when no worker can start,
runs in a child forked from the server instead, as below.

**A forked child stuck on an inherited lock is forked again.** The server is
multi-threaded: a fork copies every lock another thread held at that instant,
locked, with no thread left to release it. SQLite takes an allocator mutex on
every allocation, so a child forked while a server thread is inside SQLite (a
reset previewing a task's database, a procedural task being written) blocks on
its first query forever; measured, 12 % of forks did with two threads
querying. A single-threaded process asleep on a futex can never be woken, so
the parent checks the child (``/proc``: one thread, asleep in a futex wait, no
CPU used since the last check) and, if it is stuck, kills it and forks again,
up to :data:`FORK_ATTEMPTS` times within the same time limit.

The child cannot use the episode's sandbox connection itself, so
``VerifyContext.read_file`` in the child asks the parent over the pipe; the
parent reads the file through the reader it was given (which refuses
symlinks, non-regular files and files over the size cap, see
``server/verification.py``) and sends the bytes back.

Example:
    >>> from analyst_env.task_format import VerifierSpec
    >>> score_bounded(VerifierSpec(name="numeric"), "42", 42, ScoringLimits()).reward
    1.0
"""

from __future__ import annotations

import multiprocessing
import os
import resource
import signal
import time
from collections.abc import Callable
from typing import Any

from analyst_env.task_format import VerifierSpec
from analyst_env.verifiers.score_pool import ScoringPool
from analyst_env.verifiers.scorers import SCORERS, judge
from analyst_env.verifiers.scoring_common import (
    ScoringLimits,
    asking_reader,
    data_in_use,
    death_reason,
    failure_reason,
    serve_read,
)
from analyst_env.verifiers.verdict import Verdict, VerifyContext

__all__ = ["IN_PROCESS_SCORERS", "SCORING_POOL", "ScoringLimits", "score_bounded"]

SCORING_POOL = ScoringPool()
"""The server's scoring workers (``verifiers/score_pool.py``); started on first use or by
:meth:`~analyst_env.verifiers.score_pool.ScoringPool.warm`."""


IN_PROCESS_SCORERS = frozenset(
    {"exact", "numeric", "set", "list", "dabench", "tablebench", "dacode_text"}
)
"""Scorers of answer text alone whose parsers are linear: short answers skip the fork."""


def scored_in_process(spec: VerifierSpec, submitted: str, limits: ScoringLimits) -> bool:
    """Whether this scoring runs in the calling process (see the module docstring)."""
    if spec.name not in IN_PROCESS_SCORERS:
        return False
    return len(submitted.encode("utf-8", errors="surrogatepass")) <= limits.in_process_max_bytes


def _limit_self(limits: ScoringLimits) -> None:
    data = data_in_use() + limits.memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_DATA, (data, data))
    cpu = max(1, int(limits.cpu_s))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))


def _child(
    conn,
    spec: VerifierSpec,
    submitted: str,
    gold: Any,
    task_files: dict[str, str],
    limits: ScoringLimits,
    can_read: bool,
) -> None:
    try:
        os.setpgid(0, 0)  # so the parent can kill anything this scoring started
        _limit_self(limits)

        def ask(name: str) -> tuple[str, Any]:
            conn.send(("read", name))
            return conn.recv()

        read_file = asking_reader(ask)
        context = VerifyContext(task_files=task_files, read_file=read_file if can_read else None)
        verdict = judge(spec, submitted, gold, context, profile=limits.profile)
        conn.send(("done", (verdict.reward, dict(verdict.components), verdict.detail)))
    except BaseException as exc:  # noqa: BLE001 - every failure becomes a 0 with its reason
        _send_quietly(conn, ("failed", failure_reason(exc, limits)))
    finally:
        conn.close()
        os._exit(0)


def _send_quietly(conn, message: tuple) -> None:
    try:
        conn.send(message)
    except (OSError, ValueError):
        pass


def _kill(proc) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.kill()
    proc.join(5)


FORK_ATTEMPTS = 8
"""Forks per scoring when a child is found stuck on a lock it inherited (see above)."""
STUCK_CHECK_S = 0.25
"""How often the parent looks at a child that has not answered yet."""


def score_bounded(
    spec: VerifierSpec,
    submitted: str,
    gold: Any,
    limits: ScoringLimits,
    task_files: dict[str, str] | None = None,
    read_file: Callable[[str], bytes] | None = None,
) -> Verdict:
    """:func:`~analyst_env.verifiers.scorers.judge` in a bounded child process (or, for a
    short text answer, in this one: :func:`scored_in_process`).

    Args:
        spec: The task's scorer.
        submitted: The answer text (already checked against the size cap).
        gold: The gold answer.
        limits: Time and memory limits of this scoring.
        task_files: The task's original files (host paths).
        read_file: Reads a file the agent produced; raises ``FileNotFoundError``
            or ``OSError`` (whose message reaches the verdict).

    Returns:
        The scorer's verdict, or 0.0 with the reason if it failed or hit a limit.
    """
    if scored_in_process(spec, submitted, limits):
        try:
            return judge(
                spec,
                submitted,
                gold,
                VerifyContext(task_files=dict(task_files or {})),
                profile=limits.profile,
            )
        except Exception as exc:  # noqa: BLE001 - the same 0 with its reason as in the child
            return Verdict(0.0, {}, failure_reason(exc, limits))
    deadline = time.monotonic() + limits.timeout_s
    job = (spec, submitted, gold, dict(task_files or {}), limits, read_file is not None)
    if _in_worker(spec.name):
        verdict = SCORING_POOL.score(job, limits, deadline, read_file)
        if verdict is not None:
            return verdict
    for _ in range(FORK_ATTEMPTS):
        verdict = _score_in_child(job, limits, deadline, read_file)
        if verdict is not None:
            return verdict
    return Verdict(
        0.0,
        {},
        f"the scorer's process was stuck on a lock it inherited from the server "
        f"{FORK_ATTEMPTS} times; not scored",
    )


def _in_worker(name: str) -> bool:
    """Whether a scoring worker runs the same scorer as this process has under ``name``."""
    try:
        fn = SCORERS[name]
    except KeyError:
        return False  # unknown: the forked child's verdict says so
    return SCORING_POOL.runs(name, fn)


def _score_in_child(
    job: tuple, limits: ScoringLimits, deadline: float, read_file: Callable[[str], bytes] | None
) -> Verdict | None:
    """One forked child's verdict; None if the child was stuck on an inherited lock."""
    parent, child = multiprocessing.get_context("fork").Pipe()
    proc = multiprocessing.get_context("fork").Process(
        target=_child, args=(child, *job), daemon=True
    )
    proc.start()
    child.close()
    assert proc.pid is not None  # started
    watch = _StuckWatch(proc.pid)
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                _kill(proc)
                return Verdict(
                    0.0, {}, f"scoring took longer than {limits.timeout_s:g} s; not scored"
                )
            if not parent.poll(min(remaining, STUCK_CHECK_S)):
                if not proc.is_alive() and not parent.poll(0):
                    return Verdict(0.0, {}, death_reason(proc.exitcode, limits))
                if watch.stuck():
                    _kill(proc)
                    return None
                continue
            try:
                kind, payload = parent.recv()
            except (EOFError, OSError):
                proc.join(5)
                return Verdict(0.0, {}, death_reason(proc.exitcode, limits))
            watch.reset()
            if kind == "read":
                parent.send(serve_read(read_file, payload))
            elif kind == "done":
                reward, components, detail = payload
                return Verdict(reward, components, detail)
            else:
                return Verdict(0.0, {}, str(payload))
    finally:
        parent.close()
        if proc.is_alive():
            _kill(proc)
        else:
            proc.join(1)


class _StuckWatch:
    """Tells a child that can never wake: one thread, asleep on a futex, twice with no CPU used.

    A lone thread waits on a futex only for a lock (or condition) another thread of
    its process would release, and a forked child has no other thread. What it waits
    for was held in the server when it forked.
    """

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._last: int | None = None  # CPU ticks at the last check that found it waiting

    def reset(self) -> None:
        self._last = None

    def stuck(self) -> bool:
        ticks = _futex_waiter_ticks(self.pid)
        seen_before, self._last = self._last, ticks
        return ticks is not None and ticks == seen_before


def _futex_waiter_ticks(pid: int) -> int | None:
    """The CPU ticks of ``pid`` if it is single-threaded and asleep in a futex wait, else None."""
    try:
        with open(f"/proc/{pid}/wchan") as wchan:
            if "futex" not in wchan.read():
                return None
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    # after the command: state is field 3, utime/stime 14/15, num_threads 20 (proc(5))
    if fields[0] != "S" or fields[17] != "1":
        return None
    return int(fields[11]) + int(fields[12])
