"""What a process that forks kernels needs: the environment it must start with, and
the check before its first fork.

numpy's BLAS pool and pyarrow's jemalloc start threads at import unless these
are set, and a process with threads must not fork. The local zygote, the slot
runner and every image built for the runner set them; kernels inherit them. Once
warmed, both freeze their heap with ``freeze_for_fork``. Standard library only, so
the runner can read it before it imports anything heavy.
"""

from __future__ import annotations

import gc
import os
import threading

SINGLE_THREADED_ENV: dict[str, str] = {
    **dict.fromkeys(("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"), "1"),
    "JE_ARROW_MALLOC_CONF": "background_thread:false",
}


def freeze_for_fork(process: str) -> None:
    """Freeze the warmed heap for forking and check that nothing left a thread running.

    ``gc.freeze`` keeps the collector from touching (and so copying) the inherited
    objects in every forked kernel.

    Args:
        process: What is about to fork (``"zygote"``, ``"runner"``), for the error.

    Raises:
        RuntimeError: More than one thread runs; a fork would copy a lock some thread holds.
    """
    gc.collect()
    gc.freeze()
    os_threads = len(os.listdir("/proc/self/task"))
    if threading.active_count() != 1 or os_threads != 1:
        raise RuntimeError(
            f"{process} has {threading.active_count()} Python / {os_threads} OS threads; "
            "it must be single-threaded to fork"
        )
