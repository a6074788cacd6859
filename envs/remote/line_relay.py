"""Carry the slot runner's binary frames over a line-oriented text stream.

Some vendors give a process only text streams: Daytona's session commands take
stdin as strings (a newline is appended to each) and deliver stdout line by
line, each line prefixed with a marker byte sequence, decoded as UTF-8. The
runner's frames are binary (a 4-byte length, then JSON), so inside such a
sandbox ``python -m analyst_env.envs.remote.line_relay <runner argv...>`` starts
the runner and relays: every stdin line is base64 of bytes for the runner's
stdin, every runner stdout chunk goes out as one base64 line. When the runner
exits, the relay writes ``!exit <code>`` (base64 never contains ``!``) so the
server learns it even where the vendor keeps the stream open, and exits too.
The runner's stderr is passed through unchanged.

The server's side of the same stream (``encoded_lines``, ``decoded_lines``) is here too,
so every vendor link (``daytona_link``, ``runloop_link``) reads and writes it one way.
This runs inside the image: standard library only.
"""

from __future__ import annotations

import base64
import binascii
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable, Iterator

#: The line that ends the stream: the runner exited with the code that follows.
EXIT_MARKER = "!exit"
#: Runner output is read in chunks of at most this many bytes (one line each).
CHUNK_BYTES = 48 * 1024
#: Runner input is sent in lines of at most this many bytes (before base64), so a large
#: task file does not become one huge request body.
INPUT_CHUNK_BYTES = 1 << 20


def encode_line(data: bytes) -> str:
    """One line of the text stream carrying ``data`` (ends with a newline)."""
    return base64.b64encode(data).decode("ascii") + "\n"


def encoded_lines(data: bytes) -> Iterator[str]:
    """``data`` for the runner's stdin as lines of at most ``INPUT_CHUNK_BYTES`` each (the
    server's side: one vendor request a line)."""
    for start in range(0, len(data), INPUT_CHUNK_BYTES):
        yield encode_line(data[start : start + INPUT_CHUNK_BYTES])


def decoded_lines(texts: Iterable[str], undecodable: Callable[[bytes], None]) -> Iterator[bytes]:
    """The runner's output bytes from the relay's stdout, as a vendor delivers it (text in
    pieces of any size; the server's side).

    Raises:
        ConnectionError: The relay reported that the runner exited.
    """
    pending = ""
    for text in texts:
        pending += text
        *lines, pending = pending.split("\n")
        for line in lines:
            line = line.strip()
            if not line:
                continue
            if line.startswith(EXIT_MARKER):
                code = line[len(EXIT_MARKER) :].strip()
                raise ConnectionError(f"the sandbox runner exited with code {code}")
            try:
                yield base64.b64decode(line, validate=True)
            except binascii.Error:
                undecodable(f"(undecodable runner output: {line[:80]!r})\n".encode())


def _pump_stdin(proc: subprocess.Popen) -> None:
    """Decode stdin lines into the runner's stdin; close it at end of input."""
    assert proc.stdin is not None
    for line in sys.stdin.buffer:
        line = line.strip()
        if not line:
            continue
        try:
            data = base64.b64decode(line, validate=True)
        except binascii.Error:
            sys.stderr.write(f"line_relay: dropped a line that is not base64 ({len(line)} bytes)\n")
            continue
        try:
            proc.stdin.write(data)
            proc.stdin.flush()
        except OSError:
            return
    try:
        proc.stdin.close()
    except OSError:
        pass


def main(argv: list[str]) -> int:
    """Run ``argv`` (the runner) and relay its stdin/stdout as base64 lines."""
    if not argv:
        sys.stderr.write("usage: python -m analyst_env.envs.remote.line_relay COMMAND...\n")
        return 2
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdout is not None
    threading.Thread(target=_pump_stdin, args=(proc,), daemon=True).start()
    out = sys.stdout
    fd = proc.stdout.fileno()
    while True:
        chunk = os.read(fd, CHUNK_BYTES)
        if not chunk:
            break
        out.write(encode_line(chunk))
        out.flush()
    code = proc.wait()
    out.write(f"{EXIT_MARKER} {code}\n")
    out.flush()
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
