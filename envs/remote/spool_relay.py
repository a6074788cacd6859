"""Keep the slot runner alive where a vendor only runs commands to their end.

Azure Container Apps sandboxes run a command per HTTPS request and answer when it
ends: no stdin, no stream. The runner still lives for the whole slot: this module,
inside the image, spools its pipes through files in one directory ``DIR``, and each
request the server makes is a short command:

- ``serve DIR -- ARGV...`` (started detached) makes the FIFO ``DIR/in`` and holds it
  open for reading and writing, so the runner's stdin never ends when a writer closes
  it; the runner's stdout is appended to ``DIR/out``, its stderr to ``DIR/err``; its
  exit code goes to ``DIR/exit`` when it ends.
- ``push DIR N`` copies ``DIR/msg-N`` (uploaded just before) into the FIFO and removes
  it. A repeated push of the same N (a retried request) finds nothing and does nothing.
- ``pull DIR OFFSET WAIT`` waits until ``DIR/out`` has bytes past ``OFFSET`` (at most
  ``WAIT`` seconds), then prints them as one base64 line; after the last byte of a
  runner that ended it prints ``!exit <code>`` (base64 never contains ``!``).

This runs inside the image: standard library only.
"""

from __future__ import annotations

import base64
import fcntl
import os
import subprocess
import sys
import time

#: The line ``pull`` prints once the runner ended and all its output was read.
EXIT_MARKER = "!exit"
#: ``pull`` returns at most this many bytes (before base64) per call.
PULL_BYTES = 4 << 20
_POLL_S = 0.01
#: How long ``push`` waits for ``serve`` to make the FIFO.
_FIFO_WAIT_S = 30.0


def serve(spool: str, argv: list[str]) -> int:
    """Run ``argv`` with its pipes spooled in ``spool``; return its exit code."""
    os.makedirs(spool, exist_ok=True)
    fifo = os.path.join(spool, "in")
    if not os.path.exists(fifo):
        os.mkfifo(fifo, 0o600)
    stdin = os.open(fifo, os.O_RDWR)  # a reader and a writer of its own: never EOF
    with (
        open(os.path.join(spool, "out"), "ab") as out,
        open(os.path.join(spool, "err"), "ab") as err,
    ):
        code = subprocess.call(argv, stdin=stdin, stdout=out, stderr=err)
    os.close(stdin)
    done = os.path.join(spool, "exit")
    with open(done + ".tmp", "w") as marker:
        marker.write(str(code))
    os.replace(done + ".tmp", done)
    return code


def push(spool: str, number: str) -> int:
    """Write ``msg-<number>`` into the runner's stdin. 0 when written (or already written)."""
    message = os.path.join(spool, f"msg-{number}")
    sending = message + ".sending"
    try:
        os.replace(message, sending)
    except FileNotFoundError:
        return 0  # delivered by an earlier attempt of the same request
    fifo = os.path.join(spool, "in")
    deadline = time.monotonic() + _FIFO_WAIT_S
    while not os.path.exists(fifo) and time.monotonic() < deadline:
        time.sleep(_POLL_S)  # ``serve`` was started detached and may not have made it yet
    try:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as exc:  # ENXIO: nobody reads the FIFO any more
        sys.stderr.write(f"spool_relay: the runner is gone ({exc})\n")
        return 1
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    try:
        with open(sending, "rb") as source:
            data = memoryview(source.read())
        while data:
            data = data[os.write(fd, data) :]
    finally:
        os.close(fd)
        os.unlink(sending)
    return 0


def pull(spool: str, offset: int, wait_s: float) -> int:
    """Print the runner's output past ``offset`` (waiting up to ``wait_s``), or its exit."""
    out, done = os.path.join(spool, "out"), os.path.join(spool, "exit")
    deadline = time.monotonic() + wait_s
    while True:
        ended = os.path.exists(done)  # read before the size: no output is missed
        try:
            size = os.path.getsize(out)
        except FileNotFoundError:
            size = 0
        if size > offset:
            with open(out, "rb") as source:
                source.seek(offset)
                data = source.read(min(size - offset, PULL_BYTES))
            sys.stdout.write(base64.b64encode(data).decode("ascii") + "\n")
            return 0
        if ended:
            with open(done) as marker:
                sys.stdout.write(f"{EXIT_MARKER} {marker.read().strip()}\n")
            return 0
        if time.monotonic() >= deadline:
            return 0
        time.sleep(_POLL_S)


def main(argv: list[str]) -> int:
    if len(argv) >= 4 and argv[0] == "serve" and argv[2] == "--":
        return serve(argv[1], argv[3:])
    if len(argv) == 3 and argv[0] == "push":
        return push(argv[1], argv[2])
    if len(argv) == 4 and argv[0] == "pull":
        return pull(argv[1], int(argv[2]), float(argv[3]))
    sys.stderr.write(
        "usage: spool_relay serve DIR -- ARGV... | push DIR N | pull DIR OFFSET WAIT\n"
    )
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
