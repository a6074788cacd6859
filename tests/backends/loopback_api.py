"""A fake vendor API served from a thread on a loopback port.

Each fake in this folder is a Starlette app behind a real uvicorn server, so the vendor's
unmodified SDK talks real HTTP to it; this is the one way they start and stop.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import uvicorn


class LoopbackApi:
    """``app`` served on ``127.0.0.1:port`` once ``start`` returns, until ``stop``."""

    def __init__(self, app: Any, port: int, name: str) -> None:
        config = uvicorn.Config(
            app, host="127.0.0.1", port=port, log_level="warning", lifespan="off"
        )
        self.name = name
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)

    def start(self) -> None:
        """Serve, and wait until the port answers.

        Raises:
            RuntimeError: The server did not start within 10 s.
        """
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the fake {self.name} did not start")
            time.sleep(0.02)

    def stop(self) -> None:
        """Stop at once, without waiting for hung or following connections."""
        self._server.should_exit = True
        self._server.force_exit = True
        self._thread.join(timeout=10)
