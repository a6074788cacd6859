"""One sandbox of the fake Daytona API (``fake_daytona``): a private directory and processes.

A session command is a local process whose stdout and stderr are read line by line
into one log, each line prefixed as Daytona's daemon does
(``apps/daemon/pkg/session/execute.go``). The sandbox's absolute paths (``/work``,
``/opt/analyst_env``, ``/tmp``) are mapped into its directory and ``python`` to this
interpreter; with ``networkBlockAll`` its commands get a fresh network namespace
when the tests run as root.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from typing import Any

STDOUT_PREFIX = b"\x01\x01\x01"
STDERR_PREFIX = b"\x02\x02\x02"
MAPPED = ("/work", "/opt/analyst_env", "/tmp")
_ids = itertools.count(1)


def start_process(argv: list[str], cwd: str) -> subprocess.Popen:
    """A sandbox's command as a local process in a session of its own, every stream a pipe (the
    fake Runloop's executions run the same way)."""
    return subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
        start_new_session=True,
    )


def kill_process(proc: subprocess.Popen) -> None:
    """Kill ``proc`` and everything in its session, and reap it."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, 9)
        except ProcessLookupError:
            pass
    proc.wait()


def shell_argv(root: str, command: str, block_network: bool) -> list[str]:
    """``command`` as a fake sandbox rooted at ``root`` runs it: the sandbox's absolute paths
    mapped into ``root``, ``python`` this interpreter, in a fresh network namespace when
    ``block_network`` and the tests run as root (the fake CoreWeave's execs run the same way)."""
    mapped = re.sub(
        r"(?<=[\s=\"'])(/work|/opt/analyst_env|/tmp)(?=[/\s\"']|$)",
        lambda m: root + m.group(1),
        " " + command,
    )
    mapped = re.sub(r"(?<![\w/.=-])python(?=\s)", sys.executable, mapped).strip()
    argv = ["bash", "-c", mapped]
    if block_network and os.geteuid() == 0 and shutil.which("unshare"):
        argv = ["unshare", "--net", "--", *argv]
    return argv


class Command:
    """One session command: a local process and its prefixed log."""

    def __init__(self, argv: list[str], cwd: str) -> None:
        self.proc = start_process(argv, cwd)
        self.log = bytearray()
        self.lock = threading.Lock()
        streams = ((self.proc.stdout, STDOUT_PREFIX), (self.proc.stderr, STDERR_PREFIX))
        readers = [
            threading.Thread(target=self._label, args=stream, daemon=True) for stream in streams
        ]
        for reader in readers:
            reader.start()
        self._readers = readers

    def _label(self, pipe: Any, prefix: bytes) -> None:
        for line in iter(pipe.readline, b""):
            with self.lock:
                self.log += prefix + (line if line.endswith(b"\n") else line + b"\n")

    @property
    def finished(self) -> bool:
        return self.proc.poll() is not None and not any(r.is_alive() for r in self._readers)

    def kill(self) -> None:
        kill_process(self.proc)


class FakeSandbox:
    def __init__(self, body: dict, snapshot: dict, toolbox_url: str) -> None:
        self.id = f"sb-{next(_ids)}"
        self.body = body
        self.snapshot = snapshot
        self.toolbox_url = toolbox_url
        self.state = "started"
        self.root = tempfile.mkdtemp(prefix="fake-daytona-")
        for path in MAPPED:
            os.makedirs(self.root + path, exist_ok=True)
        self.sessions: dict[str, dict[str, Command]] = {}

    def path(self, path: str) -> str:
        return self.root + path if path.startswith(MAPPED) else path

    def argv(self, command: str) -> list[str]:
        return shell_argv(self.root, command, bool(self.body.get("networkBlockAll")))

    def dto(self) -> dict:
        return {
            "id": self.id,
            "organizationId": "org-1",
            "name": self.id,
            "snapshot": self.snapshot["name"],
            "user": "daytona",
            "env": self.body.get("env") or {},
            "labels": self.body.get("labels") or {},
            "public": False,
            "networkBlockAll": bool(self.body.get("networkBlockAll")),
            "kvm": False,
            "target": "us",
            "cpu": self.snapshot["cpu"],
            "gpu": 0,
            "memory": self.snapshot["mem"],
            "disk": self.snapshot["disk"],
            "state": self.state,
            "autoStopInterval": self.body.get("autoStopInterval"),
            "autoDeleteInterval": self.body.get("autoDeleteInterval"),
            "toolboxProxyUrl": self.toolbox_url,
        }

    def destroy(self) -> None:
        for commands in self.sessions.values():
            for command in commands.values():
                command.kill()
        shutil.rmtree(self.root, ignore_errors=True)
        self.state = "destroyed"
