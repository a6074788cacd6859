"""Start the fake CoreWeave API (``fake_coreweave.py``) as a process of its own and read what it
logged, so that neither ``grpcio`` nor ``cwsandbox`` is ever imported by the pytest process."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile


class FakeCoreWeaveProcess:
    """The fake's process: ``base_url`` and ``api_key`` to point the SDK (or the backend) at,
    and the calls it served."""

    def __init__(self, api_key: str = "cw-test-key") -> None:
        self.api_key = api_key
        self.root = tempfile.mkdtemp(prefix="fake-coreweave-")
        script = os.path.join(os.path.dirname(__file__), "fake_coreweave.py")
        self._proc = subprocess.Popen(
            [sys.executable, script, "--api-key", api_key, "--root", self.root],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._proc.stdout is not None
        self.base_url = self._proc.stdout.readline().strip()
        if not self.base_url.startswith("http://"):
            self.close()
            raise RuntimeError("the fake CoreWeave API did not start")

    def calls(self) -> list[dict]:
        """Every call served so far, oldest first (``{"method": ..., ...details}``)."""
        try:
            with open(os.path.join(self.root, "calls.jsonl")) as log:
                return [json.loads(line) for line in log]
        except FileNotFoundError:
            return []

    def methods(self) -> list[str]:
        return [call["method"] for call in self.calls()]

    def created(self) -> list[dict]:
        """The sandbox specs of every ``CreateSandbox``, as JSON (camelCase field names)."""
        return [call["sandbox"] for call in self.calls() if call["method"] == "CreateSandbox"]

    def folders(self) -> list[str]:
        """The folders of sandboxes not yet deleted."""
        return [name for name in os.listdir(self.root) if name.startswith("sandbox-")]

    def close(self) -> None:
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> FakeCoreWeaveProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
