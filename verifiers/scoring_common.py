"""What a scoring process and the server share: the limits, reading the heap, a death's reason
and the parent's side of a file read.

A scoring runs in a process the server does not trust with its own state: a child forked
per answer (``verifiers/bounded.py``) or a long-lived worker (``verifiers/score_pool.py``,
``verifiers/score_worker.py``). Both are held to the same :class:`ScoringLimits`, report a
death the same way and ask the server for the agent's files the same way, so these live
here once.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ScoringLimits:
    """What one scoring may cost.

    Attributes:
        timeout_s: Wall time for the whole scoring, file reads and any recalculation included.
        memory_mb: Heap the scoring process may add to what it held when the scoring began
            (and the limit of each program it starts, e.g. LibreOffice).
        cpu_s: CPU seconds of the scoring process (its own, not its children's).
        profile: The scoring profile, ``strict`` or ``official``.
        in_process_max_bytes: Answers up to this size, to a scorer of
            ``bounded.IN_PROCESS_SCORERS``, are scored in the server's process (0: never).
    """

    timeout_s: float = 180.0
    memory_mb: int = 2048
    cpu_s: int = 120
    profile: str = "strict"
    in_process_max_bytes: int = 1024


def data_in_use() -> int:
    """This process's data segment now (``VmData``), bytes; 0 if unknown.

    ``RLIMIT_DATA`` counts what a process already holds (a forked child starts with the
    server's whole heap mapped, a worker with its imports), so the limit of a scoring is
    set this much above it.
    """
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmData:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def death_reason(code: int | None, limits: ScoringLimits) -> str:
    """Why a scoring process ended without a verdict, from its exit code (``-signal``)."""
    if code is not None and code < 0:
        sig = signal.Signals(-code).name
        if -code in (signal.SIGXCPU, signal.SIGKILL):
            return (
                f"the scorer was stopped by {sig} (CPU limit {limits.cpu_s} s or memory limit "
                f"{limits.memory_mb} MiB)"
            )
        return f"the scorer died with {sig}"
    return (
        f"the scorer exited without a verdict (exit code {code}; memory limit "
        f"{limits.memory_mb} MiB)"
    )


def serve_read(read_file: Callable[[str], bytes] | None, name: Any) -> tuple[str, Any]:
    """The server's answer to a scoring process asking for the agent's file ``name``:
    ``("ok", bytes)``, ``("missing", why)`` or ``("error", why)``."""
    if read_file is None or not isinstance(name, str):
        return ("error", "no episode files to read")
    try:
        return ("ok", read_file(name))
    except FileNotFoundError as exc:
        return ("missing", str(exc) or name)
    except Exception as exc:  # noqa: BLE001 - the scorer decides; it sees the reason
        return ("error", f"{name}: {type(exc).__name__}: {exc}")


def asking_reader(ask: Callable[[str], tuple[str, Any]]) -> Callable[[str], bytes]:
    """A scoring process's ``read_file``: ``ask(name)`` gets the server's
    :func:`serve_read` tuple; a refusal is raised as the scorer expects."""

    def read_file(name: str) -> bytes:
        kind, payload = ask(name)
        if kind == "ok":
            return payload
        if kind == "missing":
            raise FileNotFoundError(payload)
        raise OSError(payload)

    return read_file


def failure_reason(exc: BaseException, limits: ScoringLimits) -> str:
    """The verdict's detail for a scorer that raised ``exc``."""
    if isinstance(exc, MemoryError):
        return f"the scorer ran out of memory (limit {limits.memory_mb} MiB)"
    return f"the scorer failed: {type(exc).__name__}: {str(exc)[:300]}"
