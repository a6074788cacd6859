"""Run the server in a background thread on a free loopback port.

Used by ``analyst-env eval`` and ``export`` without ``--url`` and by the live tests: the same
uvicorn server ``analyst-env serve`` runs, just in-process. It lives with the server
(it needs uvicorn, which a client process never loads); its old name
``analyst_env.client.local_server`` still works, deprecated.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import uvicorn

from analyst_env.server.body_limit import MAX_MESSAGE_BYTES

if TYPE_CHECKING:
    from analyst_env.server.settings import Settings


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class BackgroundServer:
    """``with BackgroundServer(app) as url:`` serves ``app`` until the block ends."""

    def __init__(self, app, port: int | None = None, startup_timeout_s: float = 60.0) -> None:
        self.port = port or free_port()
        config = uvicorn.Config(
            app,
            host="127.0.0.1",
            port=self.port,
            log_level="warning",
            ws_max_size=MAX_MESSAGE_BYTES,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, name="analyst-env-server", daemon=True
        )
        self._startup_timeout_s = startup_timeout_s

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> str:
        self._thread.start()
        deadline = time.monotonic() + self._startup_timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the background server failed to start")
            time.sleep(0.02)
        return self.url

    def __exit__(self, *exc) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=30)


@contextlib.contextmanager
def serving(
    settings: Settings, *, sessions: int, datasets: list[Any] | None = None
) -> Iterator[str]:
    """``with serving(settings, sessions=n) as url:``: this server, in-process, for a command run
    without ``--url``; ``sessions`` is the most episodes the command keeps open at once, and
    ``datasets``, when given, what it serves instead of the configured datasets. Everything it
    started is closed when the block ends."""
    from analyst_env.server.app import build_app
    from analyst_env.server.runtime import Runtime
    from analyst_env.server.same_origin import refuse_rebound_names

    settings = settings.model_copy(update={"max_sessions": sessions})
    runtime = Runtime(settings, datasets=datasets)
    try:
        app = build_app(settings, runtime=runtime)
        refuse_rebound_names(app, "127.0.0.1", settings.token)  # BackgroundServer's address
        with BackgroundServer(app) as url:
            yield url
    finally:
        runtime.close()
