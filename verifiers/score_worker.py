"""A long-lived scoring worker: ``python -I -m analyst_env.verifiers.score_worker``.

Forking the server for every answer costs ~23 ms (its heap is mapped and torn down) and
copies every lock another server thread held at that instant. This process instead starts
from a clean interpreter (``-I``: no user site, no ``PYTHON*`` variables, nothing of the
server's heap or threads), imports every scorer once, and scores one answer at a time for
the server (``verifiers/score_pool.py``), under the same limits a forked child has:

* memory: ``RLIMIT_DATA`` is set, for each answer, ``memory_mb`` above what the worker
  holds when the answer arrives (a ``MemoryError`` is a 0 with the reason);
* CPU: the soft ``RLIMIT_CPU`` is set, for each answer, ``cpu_s`` above the CPU the worker
  has used so far (rounded up to a whole second, so an answer may get up to a second more
  than in a forked child); past it the kernel's ``SIGXCPU`` ends the worker;
* wall time: enforced by the server, which kills the worker's process group.

**An answer cannot change a later answer's reward.** The answer and the agent's files are
adversarial. The scorers keep no state between calls but caches keyed by their own code
(``scorers._wants``) and the entry-point table; the worker restores its working directory
and environment after each answer, and it *retires* (exits after sending its verdict, and
the server starts another) after any failure (an exception, ``MemoryError``, a limit: a
half-finished scorer may leave an import or a cache half-built), after
``--retire-after`` answers, and once its heap has grown ``--retire-growth-mb`` above where
it started (fragmentation left by a huge workbook would otherwise shrink the next answer's
real allowance). A worker killed or dead is never reused.

Protocol on stdin/stdout, each frame a 4-byte big-endian length and a body: the server
sends pickles (the worker trusts the server), the worker answers in JSON (the server does
not unpickle what a process that parsed the agent's files wrote). First the worker sends
``{"ready": {name: "module:qualname"}}``; then for each job
``(spec, submitted, gold, task_files, limits, can_read)`` it may send ``{"read": name}``
(answered with :func:`~analyst_env.verifiers.scoring_common.serve_read`'s tuple) and ends
with ``{"done": [reward, components, detail], "retire": bool}`` or
``{"failed": reason, "retire": true}``. ``None`` (or end of input) stops it.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import pickle
import resource
import struct
import sys
import threading
import time
from typing import Any, BinaryIO

HEADER = struct.Struct(">I")
MAX_FRAME_BYTES = 1 << 30
"""The largest frame either side accepts (a relayed file is capped well below this)."""


def read_frame(stream: BinaryIO) -> bytes | None:
    """The next frame's body from a blocking stream; None at end of input."""
    head = stream.read(HEADER.size)
    if len(head) < HEADER.size:
        return None
    (size,) = HEADER.unpack(head)
    if size > MAX_FRAME_BYTES:
        raise ValueError(f"frame of {size} bytes")
    body = stream.read(size)
    return body if len(body) == size else None


def frame(body: bytes) -> bytes:
    """``body`` with its length in front."""
    return HEADER.pack(len(body)) + body


def where(fn: Any) -> str:
    """``module:qualname`` of a scorer: a worker runs it only if the server's is the same."""
    return f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', repr(fn))}"


class _Channel:
    def __init__(self, inp: BinaryIO, out: BinaryIO) -> None:
        self.inp, self.out = inp, out

    def send(self, message: dict[str, Any]) -> None:
        self.out.write(frame(json.dumps(message).encode()))
        self.out.flush()

    def recv(self) -> Any:
        body = read_frame(self.inp)
        return None if body is None else pickle.loads(body)


def _set_limits(memory_mb: int, cpu_s: int) -> None:
    from analyst_env.verifiers.scoring_common import data_in_use

    _, data_hard = resource.getrlimit(resource.RLIMIT_DATA)
    data = data_in_use() + memory_mb * 1024 * 1024
    if data_hard != resource.RLIM_INFINITY:
        data = min(data, data_hard)
    resource.setrlimit(resource.RLIMIT_DATA, (data, data_hard))
    used = resource.getrusage(resource.RUSAGE_SELF)
    cpu = math.ceil(used.ru_utime + used.ru_stime) + max(1, int(cpu_s))
    _, cpu_hard = resource.getrlimit(resource.RLIMIT_CPU)
    if cpu_hard != resource.RLIM_INFINITY:
        cpu = min(cpu, cpu_hard)
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu_hard))


def _lift_limits() -> None:
    for which in (resource.RLIMIT_DATA, resource.RLIMIT_CPU):
        resource.setrlimit(which, (resource.getrlimit(which)[1],) * 2)


def _score(channel: _Channel, job: tuple) -> tuple[dict[str, Any], bool]:
    """One answer's reply, and whether it failed."""
    from analyst_env.verifiers.scorers import judge
    from analyst_env.verifiers.scoring_common import asking_reader, failure_reason
    from analyst_env.verifiers.verdict import VerifyContext

    spec, submitted, gold, task_files, limits, can_read = job

    def ask(name: str) -> tuple[str, Any]:
        channel.send({"read": name})
        return channel.recv()

    read_file = asking_reader(ask)

    try:
        _set_limits(limits.memory_mb, limits.cpu_s)
        context = VerifyContext(task_files=task_files, read_file=read_file if can_read else None)
        verdict = judge(spec, submitted, gold, context, profile=limits.profile)
        reply = {"done": [verdict.reward, dict(verdict.components), verdict.detail]}
        return reply, False
    except BaseException as exc:  # noqa: BLE001 - every failure is a 0 with its reason
        return {"failed": failure_reason(exc, limits)}, True
    finally:
        _lift_limits()


def serve(channel: _Channel, retire_after: int, retire_growth_mb: int) -> None:
    """Score jobs until told to stop or it is time to retire (module docstring)."""
    from analyst_env.verifiers.scoring_common import data_in_use

    baseline, cwd, environ = data_in_use(), os.getcwd(), dict(os.environ)
    answered = 0
    while True:
        job = channel.recv()
        if job is None:
            return
        reply, failed = _score(channel, job)
        answered += 1
        grown = data_in_use() - baseline > retire_growth_mb * 1024 * 1024
        reply["retire"] = failed or grown or answered >= retire_after
        channel.send(reply)
        if reply["retire"]:
            return
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(environ)


def _exit_with_server(parent: int) -> None:
    """End this worker once the server that started it is gone, even mid-answer (a scorer
    asleep on a file would otherwise outlive a server that was killed)."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(1)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Score answers for the server (module doc).")
    parser.add_argument("--path", action="append", default=[], help="add to sys.path")
    parser.add_argument("--import", dest="imports", action="append", default=[])
    parser.add_argument("--retire-after", type=int, default=200)
    parser.add_argument("--retire-growth-mb", type=int, default=256)
    args = parser.parse_args(argv)
    # the protocol gets its own descriptors; a scorer that prints writes to stderr
    out = os.fdopen(os.dup(1), "wb")
    inp = os.fdopen(os.dup(0), "rb")
    os.dup2(2, 1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    threading.Thread(target=_exit_with_server, args=(os.getppid(),), daemon=True).start()
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # SIGXCPU would otherwise dump core
    sys.path.extend(args.path)
    from analyst_env.verifiers import SCORERS

    for module in args.imports:
        importlib.import_module(module)
    ready: dict[str, str] = {}
    for name in SCORERS:
        try:
            ready[name] = where(SCORERS[name])
        except Exception:  # noqa: BLE001, S112 - a broken plugin is scored the old way, or not
            continue
    channel = _Channel(inp, out)
    channel.send({"ready": ready})
    serve(channel, args.retire_after, args.retire_growth_mb)


if __name__ == "__main__":
    main()
