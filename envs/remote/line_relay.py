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

This runs inside the image: standard library only.
"""

from __future__ import annotations

import base64
import binascii
import os
import subprocess
import sys
import threading

#: The line that ends the stream: the runner exited with the code that follows.
EXIT_MARKER = "!exit"
#: Runner output is read in chunks of at most this many bytes (one line each).
CHUNK_BYTES = 48 * 1024


def encode_line(data: bytes) -> str:
    """One line of the text stream carrying ``data`` (ends with a newline)."""
    return base64.b64encode(data).decode("ascii") + "\n"


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
