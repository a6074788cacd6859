"""A byte channel to a slot runner in an Azure Container Apps sandbox, over ``exec`` and files.

Azure's sandbox SDK has no long-lived process with stdin or a stream: ``exec`` is one
HTTPS request answered when the command ends. The runner is started detached behind
``spool_relay serve`` (``start_command``), and the channel speaks to it with short
commands (``spool_relay``'s docstring has the protocol):

- a send uploads the frame with ``write_file`` and runs ``spool_relay push`` (two
  requests; sends are made one at a time, so frames stay in order);
- a reader thread long-polls ``spool_relay pull`` from the last offset it received,
  so output arrives one request after it was written, and an idle slot costs one
  request every ``POLL_WAIT_S``.

``SandboxClient`` is the SDK's sandbox-scoped client; every call goes through its
pipeline (its bearer token, its retries: a retried push is harmless, see ``push``).
"""

from __future__ import annotations

import base64
import binascii
import itertools
import shlex
import threading
from collections.abc import Iterator
from typing import Any

from analyst_env.envs.recipes.recipe import Recipe
from analyst_env.envs.remote import runner_image
from analyst_env.envs.remote.channel import QueueChannel, StderrTail
from analyst_env.envs.remote.relayed_runner import relay_command
from analyst_env.envs.remote.spool_relay import EXIT_MARKER

#: Where a slot's runner spools its pipes.
SPOOL = "/tmp/analyst-env-spool"
#: How long one ``pull`` waits for output before the reader asks again.
POLL_WAIT_S = 20.0
_RELAY = ("analyst_env.envs.remote.spool_relay",)


def _relay(*args: str) -> str:
    env = f"PYTHONPATH={runner_image.PACKAGE_ROOT}"
    return f"cd / && env {env} python -m {_RELAY[0]} {shlex.join(args)}"


def start_command(recipe: Recipe) -> str:
    """The command that starts the runner detached behind ``spool_relay serve`` and returns."""
    serve = relay_command(recipe, (*_RELAY, "serve", SPOOL, "--"))
    # In a subshell, so the outer shell's output (the exec's answer) is not held open.
    return (
        f"mkdir -p {SPOOL} && (setsid nohup sh -c {shlex.quote(serve)} "
        f"> {SPOOL}/relay.log 2>&1 < /dev/null &)"
    )


def _check(result: Any, what: str) -> Any:
    if result.exit_code != 0:
        raise ConnectionError(f"{what} failed ({result.exit_code}): {result.stderr[-300:]}")
    return result


def _runner_chunks(sandbox: Any, closed: threading.Event, wait_s: float) -> Iterator[bytes]:
    """The runner's stdout, pulled from the spool until it ends or the channel closes."""
    offset = 0
    while not closed.is_set():
        try:
            result = sandbox.exec(_relay("pull", SPOOL, str(offset), f"{wait_s:g}"))
        except Exception as exc:
            raise ConnectionError(f"reading the runner's output failed: {exc}") from exc
        line = _check(result, "reading the runner's output").stdout.strip()
        if line.startswith(EXIT_MARKER):
            code = line[len(EXIT_MARKER) :].strip()
            raise ConnectionError(f"the sandbox runner exited with code {code}")
        if not line:
            continue
        try:
            data = base64.b64decode(line, validate=True)
        except binascii.Error as exc:
            raise ConnectionError(f"undecodable runner output: {line[:80]!r}") from exc
        offset += len(data)
        yield data


def spooled_channel(sandbox: Any, *, wait_s: float = POLL_WAIT_S) -> QueueChannel:
    """A ``QueueChannel`` to the runner ``start_command`` started in ``sandbox``.

    Args:
        sandbox: The SDK's ``SandboxClient``.
        wait_s: How long each long-poll for output waits.
    """
    numbers = itertools.count()
    closed = threading.Event()

    def write(data: bytes) -> None:
        number = str(next(numbers))
        sandbox.write_file(f"{SPOOL}/msg-{number}", data)
        _check(sandbox.exec(_relay("push", SPOOL, number)), "writing to the runner")

    def describe() -> str:
        tail = StderrTail()
        try:
            tail.add(sandbox.read_file(f"{SPOOL}/err"))
        except Exception:
            return ""
        return tail.text()

    chunks = _runner_chunks(sandbox, closed, wait_s)
    return QueueChannel(chunks, write, closed.set, describe)
