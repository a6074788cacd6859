"""Environment variables a process that forks kernels must start with.

numpy's BLAS pool and pyarrow's jemalloc start threads at import unless these
are set, and a process with threads must not fork. The local zygote, the slot
runner and every image built for the runner set them; kernels inherit them.
Dependency-free, so the runner can read it before it imports anything heavy.
"""

from __future__ import annotations

SINGLE_THREADED_ENV: dict[str, str] = {
    **dict.fromkeys(("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"), "1"),
    "JE_ARROW_MALLOC_CONF": "background_thread:false",
}
