"""``analyst-env serve`` as a child process, for what only a real process shows: logs, signals, exit
codes.

The server is one process (``--workers 1``) unless the test passes ``--workers``. It
serves the shipped ``starter`` set with its state directory and its
scratch space (``TMPDIR``, where the local backend makes ``analyst-env-local-*``)
under the test's own directory, and writes its log to ``serve.log`` there.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx

from analyst_env.server.local_server import free_port


class ServeProcess:
    """``with ServeProcess(tmp_path, "--token", "t") as proc:`` runs the server until the block
    ends."""

    def __init__(
        self,
        root: Path,
        *args: str,
        env: dict[str, str] | None = None,
        startup_timeout_s: float = 120.0,
    ):
        self.root = Path(root)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.scratch = self.root / "scratch"
        self.log_path = self.root / "serve.log"
        self.args = args
        self.env = env or {}
        self.startup_timeout_s = startup_timeout_s
        self.proc: subprocess.Popen | None = None

    def _workers(self) -> list[str]:
        """One server process unless the test asks for workers (its signals, logs and pids
        are then the server's own)."""
        return [] if any(a.startswith("--workers") for a in self.args) else ["--workers", "1"]

    def __enter__(self) -> ServeProcess:
        self.scratch.mkdir(parents=True, exist_ok=True)
        env = {
            **os.environ,
            "TMPDIR": str(self.scratch),
            "ANALYST_ENV_STATE_DIR": str(self.root / "state"),
            "ANALYST_ENV_STANDBYS": "1",
            "PYTHONUNBUFFERED": "1",
            **self.env,
        }
        exe = str(Path(sys.executable).with_name("analyst-env"))
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [
                exe,
                "serve",
                "--port",
                str(self.port),
                "--dataset",
                "starter",
                *self._workers(),
                *self.args,
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=str(self.root),
        )
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"serve exited with {self.proc.returncode}:\n{self.log()}")
            try:  # healthy, and past its backend's warm-up (as a client waiting on /ready is)
                if httpx.get(f"{self.url}/health", timeout=2).status_code == 200:
                    status = httpx.get(f"{self.url}/ready", timeout=2).json().get("status")
                    if status not in ("starting", "failed"):  # failed: it exits (status 2)
                        return self
            except (httpx.HTTPError, ValueError):
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"serve did not become healthy:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)

    def __exit__(self, *exc) -> None:
        self.stop()
        self._log.close()
