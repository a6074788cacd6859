"""``LocalSandboxBackend``: the embedded, Docker-free sandbox backend.

Each image gets one warm zygote process (started lazily, or eagerly by
``warm_up``); every ``start()`` creates a fresh working directory, copies the
task files into it and forks a kernel from the zygote, which takes about
10-20 ms. A zygote that died is replaced on the next ``start()``.

Isolation is per-process, not per-container: kernels run as the server's user
in their own session with an address-space limit (``RLIMIT_AS``) and are killed
with their whole process tree on close. Linux only.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from functools import partial
from typing import Any

from ..sandbox import SandboxError
from .capture import DEFAULT_LIMIT_BYTES
from .episode import LocalSandbox
from .images import IMAGES
from .kernel import KernelHandle
from .workpath import resolve_inside
from .zygote_client import ZygoteDied, ZygoteProcess


class LocalSandboxBackend:
    """Starts sandboxes as kernels forked from a per-image zygote.

    Args:
        root_dir: Directory that holds the episodes' working directories; a
            private temporary directory (removed by ``close``) if ``None``.
        memory_limit_mb: Address-space limit of each kernel and the commands it
            runs; an allocation beyond it raises ``MemoryError``.
        output_limit_bytes: Bytes of stdout and of stderr kept per cell or
            command; the rest is dropped with a note.
        interrupt_grace_s: How long an interrupted cell may take to stop before
            its kernel is replaced.
        boot_timeout_s: How long a zygote may take to import and warm its image.
    """

    name = "local"

    def __init__(
        self,
        root_dir: str | None = None,
        *,
        memory_limit_mb: int = 4096,
        output_limit_bytes: int = DEFAULT_LIMIT_BYTES,
        interrupt_grace_s: float = 2.0,
        boot_timeout_s: float = 120.0,
    ) -> None:
        self._owns_root = root_dir is None
        if root_dir is None:
            root_dir = tempfile.mkdtemp(prefix="analyst-env-local-")
        else:
            os.makedirs(root_dir, exist_ok=True)
        self.root_dir = os.path.realpath(root_dir)
        self.memory_limit_mb = memory_limit_mb
        self.output_limit_bytes = output_limit_bytes
        self.interrupt_grace_s = interrupt_grace_s
        self.boot_timeout_s = boot_timeout_s
        self._zygotes: dict[str, ZygoteProcess] = {}
        self._zygote_lock = threading.Lock()  # also serializes fork requests
        self._sandboxes: set[LocalSandbox] = set()
        self._sandboxes_lock = threading.Lock()
        self._closed = False

    def warm_up(self, image: str = "default") -> None:
        """Start ``image``'s zygote now instead of on the first ``start()``.

        Raises:
            SandboxError: The image is unknown or its zygote failed to start.
        """
        self._check_image(image)
        with self._zygote_lock:
            self._zygote_locked(image)

    def start(
        self,
        image: str,
        *,
        files: dict[str, str],
        seed: int | None = None,
        env: dict[str, str] | None = None,
    ) -> LocalSandbox:
        """Start a fresh sandbox; see ``SandboxBackend.start``.

        Raises:
            SandboxError: The backend is closed, the image is unknown, a task
                file could not be copied or the kernel could not be started.
        """
        if self._closed:
            raise SandboxError("the backend is closed")
        self._check_image(image)
        workdir = os.path.realpath(tempfile.mkdtemp(prefix="episode-", dir=self.root_dir))
        try:
            _populate(workdir, files)
            spec = {
                "workdir": workdir,
                "seed": seed,
                "env": dict(env or {}),
                "memory_limit_mb": self.memory_limit_mb,
                "output_limit_bytes": self.output_limit_bytes,
            }
            kernel = self._fork(image, spec)
        except BaseException:
            shutil.rmtree(workdir, ignore_errors=True)
            raise
        sandbox = LocalSandbox(
            kernel,
            spec,
            fork=partial(self._fork, image),
            on_close=self._forget,
            interrupt_grace_s=self.interrupt_grace_s,
        )
        with self._sandboxes_lock:
            self._sandboxes.add(sandbox)
        return sandbox

    def close(self) -> None:
        """Close every live sandbox and stop the zygotes. Idempotent."""
        self._closed = True
        with self._sandboxes_lock:
            sandboxes = list(self._sandboxes)
        for sandbox in sandboxes:
            sandbox.close()
        with self._zygote_lock:
            for zygote in self._zygotes.values():
                zygote.stop()
            self._zygotes.clear()
        if self._owns_root:
            shutil.rmtree(self.root_dir, ignore_errors=True)

    def _check_image(self, image: str) -> None:
        if image not in IMAGES:
            raise SandboxError(f"unknown image {image!r}; the local backend has {sorted(IMAGES)}")

    def _zygote_locked(self, image: str) -> ZygoteProcess:
        zygote = self._zygotes.get(image)
        if zygote is None or not zygote.alive():
            if zygote is not None:
                zygote.stop()
            zygote = ZygoteProcess(image, boot_timeout_s=self.boot_timeout_s)
            self._zygotes[image] = zygote
        return zygote

    def _fork(self, image: str, spec: dict[str, Any]) -> KernelHandle:
        if self._closed:
            raise SandboxError("the backend is closed")
        with self._zygote_lock:
            try:
                return self._zygote_locked(image).fork(spec)
            except ZygoteDied:
                # It may have died after the liveness check; retry once on a fresh one.
                self._zygotes.pop(image).stop()
                return self._zygote_locked(image).fork(spec)

    def _forget(self, sandbox: LocalSandbox) -> None:
        with self._sandboxes_lock:
            self._sandboxes.discard(sandbox)


def _populate(workdir: str, files: dict[str, str]) -> None:
    """Copy the task files into ``workdir`` and create ``logs/verifier/``.

    Raises:
        SandboxError: A name escapes ``workdir`` or a file cannot be copied.
    """
    try:
        for name, source in files.items():
            target = resolve_inside(workdir, name)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copyfile(source, target)
        os.makedirs(os.path.join(workdir, "logs", "verifier"), exist_ok=True)
    except (OSError, ValueError) as exc:
        raise SandboxError(f"could not prepare the working directory: {exc}") from exc
