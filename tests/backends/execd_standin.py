#!/usr/bin/env python3
"""A stand-in for OpenSandbox's execd, for a real ``opensandbox-server`` where execd's image
cannot be had.

The server copies ``/execd`` and ``/bootstrap.sh`` out of its execd image into every
sandbox and starts execd there. This script, put into such an image, serves what the
backend uses of execd, as ``components/execd`` does (``PTY.md``, ``pkg/web/model/
pty_ws.go``): ``GET /ping``, ``POST /pty``, ``DELETE /pty/{id}`` and the pipe-mode
WebSocket ``/pty/{id}/ws?pty=0`` (a JSON ``connected`` frame; binary frames ``0x01``
stdout, ``0x02`` stderr out and ``0x00`` stdin in; a JSON ``exit`` frame) in front of a
real ``bash --norc --noprofile``. Standard library only: it runs in whatever image the
sandbox runs.

``fake_opensandbox`` runs it on the host too, one per fake sandbox, with options a
container does not need: ``--token`` (execd's ``X-EXECD-ACCESS-TOKEN``), ``--root`` (the
directory standing in for the container's filesystem: bash starts there, and ``/work``
and ``python`` in the first command line are mapped to it and to this interpreter) and
``--no-network`` (bash in a fresh network namespace, as a deny-all egress policy; root only).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import secrets
import shlex
import shutil
import signal
import struct
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
_SESSIONS: set[str] = set()
_PORT = 44772
_SELF_PROXY = f"/proxy/{_PORT}"
_OPTIONS = argparse.Namespace(port=_PORT, token=None, root=None, no_network=False)


def _map_first_line(data: bytes, root: str) -> bytes:
    """The first command line with the container's ``/work`` and ``python`` made local."""
    line, _, rest = data.partition(b"\n")
    local = {"/work": os.path.join(root, "work"), "python": sys.executable}
    words = [local.get(word, word) for word in shlex.split(line.decode())]
    return shlex.join(words).encode() + b"\n" + rest


def _send(sock, lock: threading.Lock, opcode: int, payload: bytes) -> None:
    n = len(payload)
    if n < 126:
        header = struct.pack(">BB", 0x80 | opcode, n)
    elif n < 1 << 16:
        header = struct.pack(">BBH", 0x80 | opcode, 126, n)
    else:
        header = struct.pack(">BBQ", 0x80 | opcode, 127, n)
    with lock:
        sock.sendall(header + payload)


def _exact(stream, n: int) -> bytes:
    data = stream.read(n)
    if len(data) < n:
        raise EOFError
    return data


def _frame(stream) -> tuple[int, bytes]:
    first, second = _exact(stream, 2)
    n = second & 0x7F
    if n == 126:
        n = struct.unpack(">H", _exact(stream, 2))[0]
    elif n == 127:
        n = struct.unpack(">Q", _exact(stream, 8))[0]
    mask = _exact(stream, 4) if second & 0x80 else b"\0\0\0\0"
    data = _exact(stream, n)
    key = (mask * (n // 4 + 1))[:n]
    plain = (int.from_bytes(data, "big") ^ int.from_bytes(key, "big")).to_bytes(n, "big")
    return first & 0x0F, plain


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def parse_request(self) -> bool:
        # The server's endpoint for execd is ``host:port/proxy/44772``: execd's own proxy,
        # which for its own port serves the request itself.
        ok = super().parse_request()
        if ok and self.path.startswith(_SELF_PROXY):
            self.path = self.path[len(_SELF_PROXY) :] or "/"
        if ok and _OPTIONS.token and self.headers.get("X-EXECD-ACCESS-TOKEN") != _OPTIONS.token:
            self.close_connection = True
            self._reply(401, {"code": "UNAUTHORIZED"})
            return False
        return ok

    def _reply(self, status: int, body: dict | None = None) -> None:
        data = json.dumps(body).encode() if body is not None else b""
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path.rstrip("/") != "/pty":
            return self._reply(404, {"code": "NOT_FOUND"})
        session = secrets.token_hex(6)
        _SESSIONS.add(session)
        self._reply(201, {"session_id": session})

    def do_DELETE(self) -> None:
        _SESSIONS.discard(self.path.rstrip("/").rsplit("/", 1)[-1])
        self._reply(200, {})

    def do_GET(self) -> None:
        path, _, query = self.path.partition("?")
        if path == "/ping":
            return self._reply(200, {})
        parts = path.strip("/").split("/")
        if len(parts) != 3 or parts[0] != "pty" or parts[2] != "ws" or parts[1] not in _SESSIONS:
            return self._reply(404, {"code": "SESSION_GONE"})
        if "pty=0" not in query.split("&"):
            return self._reply(400, {"code": "INVALID_FRAME", "error": "pipe mode only"})
        accept = base64.b64encode(
            hashlib.sha1((self.headers["Sec-WebSocket-Key"] + _GUID).encode()).digest()
        ).decode()
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        self.end_headers()
        self.wfile.flush()
        self._pipe(parts[1])
        self.close_connection = True

    def _pipe(self, session: str) -> None:
        sock, lock = self.connection, threading.Lock()
        argv = ["bash", "--norc", "--noprofile"]
        if _OPTIONS.no_network and os.geteuid() == 0 and shutil.which("unshare"):
            argv = ["unshare", "--net", "--", *argv]
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=_OPTIONS.root,
            start_new_session=True,
        )
        pending = b"" if _OPTIONS.root else None  # the first line, until it is complete
        connected = {"type": "connected", "session_id": session, "mode": "pipe"}
        _send(sock, lock, 1, json.dumps(connected).encode())

        def pump(fd: int, kind: int) -> None:
            while chunk := os.read(fd, 32 * 1024):
                try:
                    _send(sock, lock, 2, bytes([kind]) + chunk)
                except OSError:
                    return

        pumps = [
            threading.Thread(target=pump, args=(proc.stdout.fileno(), 1), daemon=True),
            threading.Thread(target=pump, args=(proc.stderr.fileno(), 2), daemon=True),
        ]
        for thread in pumps:
            thread.start()

        def watch() -> None:
            code = proc.wait()
            for thread in pumps:
                thread.join()
            try:
                _send(sock, lock, 1, json.dumps({"type": "exit", "exit_code": code}).encode())
                _send(sock, lock, 8, struct.pack(">H", 1000))
            except OSError:
                pass

        threading.Thread(target=watch, daemon=True).start()
        try:
            while True:
                opcode, data = _frame(self.rfile)
                if opcode == 8:
                    break
                if opcode == 9:
                    _send(sock, lock, 10, data)
                elif opcode == 2 and data[:1] == b"\0":
                    payload = data[1:]
                    if pending is not None:
                        pending += payload
                        if b"\n" not in pending:
                            continue
                        payload, pending = _map_first_line(pending, _OPTIONS.root), None
                    proc.stdin.write(payload)
                    proc.stdin.flush()
        except (EOFError, OSError):
            pass
        if proc.poll() is None:  # the client left: end what the session runs
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

    def log_message(self, format: str, *args: object) -> None:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description="A stand-in for OpenSandbox's execd")
    parser.add_argument("--host", default="0.0.0.0")
    parser.add_argument("--port", type=int, default=_PORT)
    parser.add_argument("--token")
    parser.add_argument("--root")
    parser.add_argument("--no-network", action="store_true")
    _OPTIONS.__dict__.update(vars(parser.parse_args()))
    ThreadingHTTPServer((_OPTIONS.host, _OPTIONS.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
