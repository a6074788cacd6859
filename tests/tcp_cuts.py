"""Cutting TCP connections the way networks do: at the client's socket, or in a proxy in between.

Used by the resume tests of the server, the typed client and the trainer adapters.
"""

from __future__ import annotations

import socket
import threading


class DroppingProxy:
    """A TCP proxy on a loopback port in front of the server.

    ``drop()`` cuts every connection through it (no WebSocket close frame);
    ``refuse(True)`` makes it close new connections at once (the server looks
    unreachable); ``swallow(True)`` makes it discard what clients send (a frame
    that never reaches the server); ``partition()`` silently cuts the client side
    of every connection and leaves the server side open (a half-open link: the
    server notices nothing). An end of stream is passed on, as a real proxy does.
    """

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.links: list[socket.socket] = []
        self.refusing = False
        self.swallowing = False
        self.connections = 0
        # Client sockets whose end of stream is not passed on. Held as objects, not file
        # numbers: a closed socket's number is soon reused by a new connection.
        self._partitioned: set[socket.socket] = set()
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, scheme: str = "http") -> str:
        return f"{scheme}://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.refusing:
                client.close()
                continue
            self.connections += 1
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            self.links += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, from_client: bool) -> None:
        try:
            while data := src.recv(65536):
                if not (from_client and self.swallowing):
                    dst.sendall(data)
            if src not in self._partitioned:
                dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def refuse(self, on: bool) -> None:
        self.refusing = on

    def swallow(self, on: bool) -> None:
        self.swallowing = on

    def partition(self) -> None:
        for client in self.links[::2]:
            self._partitioned.add(client)
            cut(client)
        self.links.clear()

    def drop(self) -> None:
        for link in self.links:
            try:
                link.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            link.close()
        self.links.clear()

    def close(self) -> None:
        self.drop()
        for client in self._partitioned:
            client.close()
        self.listener.close()


def cut(raw: socket.socket) -> None:
    """Drop a TCP connection under its owner, as a network failure would (no close frame)."""
    try:
        raw.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def client_socket(env) -> socket.socket:
    """The TCP socket under an ``AnalystEnv`` (sync wrapper or async client)."""
    client = getattr(env, "async_client", env)
    return client._ws.transport.get_extra_info("socket")


def later(delay_s: float, fn, *args) -> threading.Timer:
    """Run ``fn(*args)`` after ``delay_s`` on a timer thread (while the test blocks in a step)."""
    timer = threading.Timer(delay_s, fn, args)
    timer.daemon = True
    timer.start()
    return timer
