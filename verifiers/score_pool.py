"""The server's side of the long-lived scoring workers (``verifiers/score_worker.py``).

:class:`ScoringPool` hands each scoring to an idle worker (if none is idle, the scoring
forks as before while another worker starts in the background), relays the worker's file
reads to the episode's reader, and holds the wall-time limit: past the deadline it kills
the worker's process group. A worker that was killed, died, failed a scoring or asked to
retire is never given another answer; a new one starts when needed. Whatever happens,
the scoring gets a verdict (0.0 with the reason) and never an exception.

A worker runs only the scorers it has under the same ``module:qualname`` as the server
(:meth:`ScoringPool.runs`): a scorer registered at run time in the server (a test, a
notebook) or replaced there is scored in a forked child instead (``verifiers/bounded.py``),
as is every scoring when no worker can be started.

Example:
    >>> from analyst_env.task_format import VerifierSpec
    >>> from analyst_env.verifiers.scoring_common import ScoringLimits
    >>> pool = ScoringPool()
    >>> pool.warm()  # else the first scorings fork while a worker starts in the background
    >>> job = (VerifierSpec(name="numeric"), "4.0", 4, {}, ScoringLimits(), False)
    >>> pool.score(job, ScoringLimits(), time.monotonic() + 60, None).reward
    1.0
    >>> pool.close()
"""

from __future__ import annotations

import json
import os
import pickle
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from analyst_env.verifiers.score_worker import HEADER, frame, where
from analyst_env.verifiers.scoring_common import ScoringLimits, death_reason, serve_read
from analyst_env.verifiers.verdict import Verdict

STARTUP_TIMEOUT_S = 60.0
"""How long a worker may take to import the scorers before it is given up."""
MAX_REPLY_BYTES = 16 * 1024 * 1024
"""The largest message a worker may send (a verdict, a file's name); more is a dead worker."""
MAX_FAILED_STARTS = 3
"""Failed starts in a row after which no worker is started again (every scoring forks)."""


class _Timeout(Exception):
    pass


class _Dead(Exception):
    pass


def _wait_ready(fd: int, events: int, deadline: float) -> None:
    """Return once ``fd`` is ready (or closed); raise ``_Timeout`` at ``deadline``. ``poll``,
    not ``select``, which refuses descriptors past 1024 (a server holding many sessions has
    them)."""
    poller = select.poll()
    poller.register(fd, events)
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise _Timeout
        if poller.poll(max(1, int(remaining * 1000))):
            return


class _Worker:
    """One worker process and its two pipes."""

    def __init__(self, command: Sequence[str]) -> None:
        self.proc = subprocess.Popen(
            list(command),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            start_new_session=True,  # its own process group: killed with what it started
            close_fds=True,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._in, self._out = self.proc.stdin.fileno(), self.proc.stdout.fileno()
        os.set_blocking(self._in, False)
        self.retired = False
        self.generation = 0
        try:
            ready = self.recv(time.monotonic() + STARTUP_TIMEOUT_S).get("ready")
        except (_Timeout, _Dead, ValueError, AttributeError):
            self.kill()
            raise
        self.scorers: dict[str, str] = dict(ready or {})

    def send(self, message: Any, deadline: float) -> None:
        data = memoryview(frame(pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)))
        while data:
            _wait_ready(self._in, select.POLLOUT, deadline)
            try:
                data = data[os.write(self._in, data) :]
            except BlockingIOError:
                continue
            except OSError:  # the worker is gone (EPIPE)
                raise _Dead from None

    def recv(self, deadline: float) -> dict[str, Any]:
        (size,) = HEADER.unpack(self._read(HEADER.size, deadline))
        if size > MAX_REPLY_BYTES:
            raise _Dead
        message = json.loads(self._read(size, deadline))
        if not isinstance(message, dict):
            raise _Dead
        return message

    def _read(self, size: int, deadline: float) -> bytes:
        chunks, left = [], size
        while left:
            _wait_ready(self._out, select.POLLIN, deadline)
            chunk = os.read(self._out, min(left, 1 << 20))
            if not chunk:
                raise _Dead
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def kill(self) -> None:
        self.retired = True
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.kill()
        self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout):
            try:
                pipe.close()  # type: ignore[union-attr]
            except OSError:
                pass

    def stop(self) -> None:
        """Ask an idle worker to exit; kill it if it does not at once."""
        try:
            self.send(None, time.monotonic() + 1)
            self.proc.wait(2)
        except (_Timeout, _Dead, subprocess.TimeoutExpired):
            pass
        self.kill()


class ScoringPool:
    """Long-lived scoring workers, one answer at a time each (module docstring).

    A scoring never waits for a worker: it takes an idle one, or, if none is idle, is
    scored in a forked child while a new worker starts in the background (up to
    ``max_workers`` alive), so a burst of answers costs forks until workers are ready,
    never a worker's start-up (~1 s of imports) or another session's scoring.

    Args:
        max_workers: Workers alive at once (busy or idle); each holds ~170 MB.
        retire_after: Answers a worker scores before it is replaced.
        imports: Modules each worker imports besides the package's scorers.
        paths: Directories added to each worker's ``sys.path`` (for ``imports``).
    """

    def __init__(
        self,
        max_workers: int = 2,
        retire_after: int = 200,
        imports: Sequence[str] = (),
        paths: Sequence[str] = (),
    ) -> None:
        self.max_workers = max_workers
        self.command = [sys.executable, "-I", "-m", "analyst_env.verifiers.score_worker"]
        self.command += [f"--retire-after={retire_after}"]
        self.command += [f"--import={m}" for m in imports] + [f"--path={p}" for p in paths]
        self._lock = threading.Lock()
        self._idle: list[_Worker] = []
        self._alive = 0  # workers started or starting, not yet stopped
        self._scorers: dict[str, str] | None = None  # what a worker has; None before the first
        self._generation = 0  # close() moves it on: workers of an older one are not kept
        self.started = 0  # workers started so far (tests and benchmarks read it)
        self.scored = 0  # scorings given to a worker so far
        self.failed_starts = 0

    def runs(self, name: str, fn: Any) -> bool:
        """Whether a worker runs this scorer: the same ``module:qualname`` as ``fn``. False
        until the first worker has started (it is started in the background then)."""
        if self._scorers is None:
            self._start_in_background()
            return False
        return self._scorers.get(name) == where(fn)

    def warm(self) -> None:
        """Start a worker now, and wait for it, if none is idle (at server start, in a
        thread off the path of /health)."""
        with self._lock:
            if self._idle or self._alive >= self.max_workers:
                return
            self._alive += 1
        self._start()

    def score(
        self,
        job: tuple,
        limits: ScoringLimits,
        deadline: float,
        read_file: Callable[[str], bytes] | None,
    ) -> Verdict | None:
        """The verdict on ``job`` (``(spec, submitted, gold, task_files, limits, can_read)``)
        from an idle worker; None if none is idle (score it another way)."""
        with self._lock:
            worker = self._idle.pop() if self._idle else None
        if worker is None:
            self._start_in_background()
            return None
        with self._lock:
            self.scored += 1
        try:
            return self._run(worker, job, limits, deadline, read_file)
        finally:
            self._release(worker)

    def _run(self, worker: _Worker, job, limits, deadline, read_file) -> Verdict:
        try:
            worker.send(job, deadline)
            while True:
                message = worker.recv(deadline)
                if "read" in message:
                    worker.send(serve_read(read_file, message["read"]), deadline)
                    continue
                worker.retired = worker.retired or bool(message.get("retire"))
                if "done" in message:
                    reward, components, detail = message["done"]
                    return Verdict(float(reward), dict(components), str(detail))
                worker.retired = True
                return Verdict(0.0, {}, str(message.get("failed", "the scorer failed")))
        except _Timeout:
            worker.kill()
            return Verdict(0.0, {}, f"scoring took longer than {limits.timeout_s:g} s; not scored")
        except _Dead:
            worker.kill()
            return Verdict(0.0, {}, death_reason(worker.proc.returncode, limits))
        except (ValueError, TypeError, KeyError):  # not JSON, or not a verdict's shape
            worker.kill()
            return Verdict(0.0, {}, "the scoring worker sent a malformed reply; not scored")

    def _start_in_background(self) -> None:
        with self._lock:
            if self._alive >= self.max_workers or self.failed_starts >= MAX_FAILED_STARTS:
                return
            self._alive += 1
        threading.Thread(target=self._start, name="scoring-worker-start", daemon=True).start()

    def _start(self) -> None:
        """Start a worker (``_alive`` already counts it) and make it idle."""
        with self._lock:
            generation = self._generation
        try:
            worker = _Worker(self.command)
        except (OSError, _Timeout, _Dead, ValueError):
            with self._lock:
                self._alive -= 1
                self.failed_starts += 1
            return
        worker.generation = generation
        with self._lock:
            self.started += 1
            self.failed_starts = 0
            if self._scorers is None:
                self._scorers = worker.scorers
        self._release(worker)

    def _release(self, worker: _Worker) -> None:
        if not worker.retired and worker.proc.poll() is None:
            with self._lock:
                if worker.generation == self._generation:
                    self._idle.append(worker)
                    return
            worker.stop()
        else:
            worker.kill()
        with self._lock:
            self._alive -= 1

    def close(self) -> None:
        """Stop the idle workers; a busy one is stopped when its scoring ends. The pool can
        still be used: it starts workers again when asked."""
        with self._lock:
            idle, self._idle = self._idle, []
            self._generation += 1
            self._alive -= len(idle)
        for worker in idle:
            worker.stop()
