"""A stand-in for the ``modal`` SDK that runs sandboxes as local processes.

Modal has no local or mock mode, so the Modal backend takes the SDK as a
module-like object and the tests pass this one. Each class here mirrors the
real one's call signatures (``test_modal_backend`` checks them against the
installed ``modal`` with ``inspect.signature``), and every call is recorded in
``CALLS`` so the test can also bind the recorded arguments to the real
signatures. Behaviour that matters is real: ``Sandbox.exec`` starts the given
command as a local process with bytes stdin/stdout (the real slot runner
runs in it), ``block_network=True`` puts it in a fresh network namespace when
the tests run as root, and ``terminate`` kills it.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from types import SimpleNamespace
from typing import Any

CALLS: list[tuple[str, tuple, dict]] = []
PUBLISHED: dict[str, list] = {}
SANDBOXES: list[FakeSandbox] = []
_ids = itertools.count(1)
# Failure injection for the tests.
FAULTS = SimpleNamespace(hang_s=0.0, auth_error=False)


def _record(name: str, args: tuple, kwargs: dict) -> None:
    CALLS.append((name, args, kwargs))


def reset() -> None:
    CALLS.clear()
    PUBLISHED.clear()
    FAULTS.hang_s = 0.0
    FAULTS.auth_error = False


class NotFoundError(Exception):
    pass


class AuthError(Exception):
    pass


exception = SimpleNamespace(NotFoundError=NotFoundError, AuthError=AuthError)


class Client:
    def __init__(self, token_id: str) -> None:
        self.token_id = token_id

    @classmethod
    def from_credentials(cls, token_id: str, token_secret: str) -> Client:
        _record("Client.from_credentials", (token_id, token_secret), {})
        if FAULTS.hang_s:
            time.sleep(FAULTS.hang_s)  # what the real client does while it retries without network
        if FAULTS.auth_error:
            raise AuthError("Token ID is malformed")
        return cls(token_id)


class App:
    def __init__(self, name: str) -> None:
        self.name = name
        self.app_id = f"ap-{next(_ids)}"

    @staticmethod
    def lookup(
        name: str,
        *,
        client: Any = None,
        environment_name: str | None = None,
        create_if_missing: bool = False,
    ):
        _record("App.lookup", (name,), {"client": client, "create_if_missing": create_if_missing})
        return App(name)


class Image:
    """A lazy recipe of build steps, like the real builder; nothing is built."""

    def __init__(self, steps: list) -> None:
        self.steps = steps
        self.object_id: str | None = None
        self._name: str | None = None

    def _then(self, name: str, args: tuple, kwargs: dict) -> Image:
        _record(f"Image.{name}", args, kwargs)
        return Image(self.steps + [(name, args, kwargs)])

    @staticmethod
    def from_registry(
        tag: str,
        secret: Any = None,
        *,
        # The real SDK's default, which test_fake_signatures_match_the_real_sdk compares.
        setup_dockerfile_commands: list[str] = [],  # noqa: B006
        force_build: bool = False,
        add_python: str | None = None,
        **kwargs,
    ):
        _record("Image.from_registry", (tag,), {})
        return Image([("from_registry", (tag,), {})])

    def apt_install(
        self,
        *packages: str,
        force_build: bool = False,
        env: Any = None,
        secrets: Any = None,
        gpu: Any = None,
    ):
        return self._then("apt_install", packages, {})

    def uv_pip_install(
        self,
        *packages: str,
        requirements: Any = None,
        find_links: Any = None,
        index_url: str | None = None,
        extra_index_url: str | None = None,
        pre: bool = False,
        extra_options: str = "",
        force_build: bool = False,
        uv_version: Any = None,
        env: Any = None,
        secrets: Any = None,
        gpu: Any = None,
    ):
        return self._then("uv_pip_install", packages, {"index_url": index_url})

    def run_commands(
        self,
        *commands: str,
        env: Any = None,
        secrets: Any = None,
        volumes: Any = None,
        gpu: Any = None,
        force_build: bool = False,
    ):
        return self._then("run_commands", commands, {})

    def env(self, vars: dict[str, str]):
        return self._then("env", (vars,), {})

    def add_local_file(self, local_path: Any, remote_path: str, *, copy: bool = False):
        return self._then("add_local_file", (local_path, remote_path), {"copy": copy})

    def add_local_dir(
        self,
        local_path: Any,
        remote_path: str,
        *,
        copy: bool = False,
        # The real SDK's default, which test_fake_signatures_match_the_real_sdk compares.
        ignore: Any = [],  # noqa: B006
    ):
        return self._then(
            "add_local_dir", (local_path, remote_path), {"copy": copy, "ignore": ignore}
        )

    def build(self, app: Any = None):
        _record("Image.build", (app,), {})
        built = Image(self.steps)
        built.object_id = f"im-{next(_ids)}"
        return built

    def publish(
        self,
        name: str,
        *,
        environment_name: str | None = None,
        experimental_options: Any = None,
        client: Any = None,
    ):
        _record("Image.publish", (name,), {"client": client})
        if self.object_id is None:
            raise RuntimeError("publish() of an image that was not built")
        PUBLISHED[name] = self.steps

    @staticmethod
    def from_name(name: str, *, environment_name: str | None = None, client: Any = None):
        _record("Image.from_name", (name,), {"client": client})
        image = Image([])
        image._name = name
        return image

    def hydrate(self, client: Any = None):
        _record("Image.hydrate", (), {"client": client})
        if self._name is not None:
            if self._name not in PUBLISHED:
                raise NotFoundError(f"Image '{self._name}' not found")
            self.steps = PUBLISHED[self._name]
        self.object_id = self.object_id or f"im-{next(_ids)}"
        return self


class _Writer:
    def __init__(self, pipe: Any) -> None:
        self._pipe = pipe

    def write(self, data: bytes | bytearray | memoryview | str) -> None:
        self._pipe.write(data.encode() if isinstance(data, str) else bytes(data))

    def drain(self) -> None:
        self._pipe.flush()

    def write_eof(self) -> None:
        try:
            self._pipe.close()
        except OSError:
            pass


class _Reader:
    def __init__(self, pipe: Any) -> None:
        self._fd = pipe.fileno()

    def __iter__(self):
        while True:
            try:
                chunk = os.read(self._fd, 1 << 16)
            except OSError:
                return
            if not chunk:
                return
            yield chunk


class ContainerProcess:
    def __init__(self, proc: subprocess.Popen) -> None:
        self._proc = proc
        self.stdin = _Writer(proc.stdin)
        self.stdout = _Reader(proc.stdout)
        self.stderr = _Reader(proc.stderr)

    def poll(self) -> int | None:
        return self._proc.poll()

    def wait(self) -> int:
        return self._proc.wait()


def _can_unshare_net() -> bool:
    return os.geteuid() == 0 and shutil.which("unshare") is not None


class Sandbox:
    @staticmethod
    def create(
        *args: str,
        app: Any = None,
        image: Any = None,
        timeout: int | None = 300,
        workdir: str | None = None,
        cpu: Any = None,
        memory: Any = None,
        runtime: Any = None,
        block_network: bool = False,
        client: Any = None,
    ):
        _record(
            "Sandbox.create",
            args,
            {
                "app": app,
                "image": image,
                "timeout": timeout,
                "cpu": cpu,
                "memory": memory,
                "runtime": runtime,
                "block_network": block_network,
                "client": client,
            },
        )
        if app is None:
            raise ValueError("App is required when creating a Sandbox from outside Modal")
        if image is None:
            raise ValueError("the fake needs an image")
        if image.object_id is None:
            image.hydrate()  # like the real SDK, a named image is resolved when first used
        sandbox = FakeSandbox(block_network)
        SANDBOXES.append(sandbox)
        return sandbox


class FakeSandbox:
    """One fake sandbox: a private directory standing in for its filesystem."""

    def __init__(self, block_network: bool) -> None:
        self.object_id = f"sb-{next(_ids)}"
        self.block_network = block_network
        self.root = tempfile.mkdtemp(prefix="fake-modal-")
        self.processes: list[subprocess.Popen] = []
        self.returncode: int | None = None
        self._lock = threading.Lock()

    def exec(
        self,
        *args: str,
        timeout: int | None = None,
        workdir: str | None = None,
        env: dict | None = None,
        text: bool = True,
        bufsize: int = -1,
        pty: bool = False,
    ):
        _record("Sandbox.exec", args, {"text": text, "env": env})
        if text:
            raise ValueError("the backend must use text=False for framed bytes")
        # The sandbox's /work lives under this fake's private directory.
        argv = [os.path.join(self.root, "work") if a == "/work" else a for a in args]
        argv = [sys.executable if a == "python" else a for a in argv]
        if self.block_network and _can_unshare_net():
            argv = ["unshare", "--net", "--", *argv]
        with self._lock:
            if self.returncode is not None:
                raise RuntimeError("Sandbox has already terminated")
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env={**os.environ, **(env or {})},
                start_new_session=True,
            )
            self.processes.append(proc)
        return ContainerProcess(proc)

    def terminate(self, *, wait: bool = False) -> int | None:
        _record("Sandbox.terminate", (), {"wait": wait})
        with self._lock:
            self.returncode = 137 if self.returncode is None else self.returncode
            for proc in self.processes:
                if proc.poll() is None:
                    try:
                        os.killpg(proc.pid, 9)
                    except ProcessLookupError:
                        pass
                proc.wait()
                for pipe in (proc.stdin, proc.stdout, proc.stderr):
                    try:
                        pipe.close()
                    except OSError:
                        pass
        shutil.rmtree(self.root, ignore_errors=True)
        return self.returncode

    def poll(self) -> int | None:
        return self.returncode
