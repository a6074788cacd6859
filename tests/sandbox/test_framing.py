"""The framed-JSON connection between the server and a kernel, at descriptor numbers a busy server
reaches."""

from __future__ import annotations

import os
import resource
import socket
import time

import pytest

from analyst_env.envs.frame_socket import FrameConnection
from analyst_env.server.runtime import raise_open_files_limit

HIGH_FD = 1500  # above FD_SETSIZE (1024), where select() fails


def _socket_at(fd_number: int, sock: socket.socket) -> socket.socket:
    os.dup2(sock.fileno(), fd_number)
    sock.close()
    return socket.socket(fileno=fd_number)


def test_recv_with_deadline_works_on_a_descriptor_above_fd_setsize():
    if raise_open_files_limit() <= HIGH_FD:
        pytest.skip(
            "the hard limit on open files "
            f"({resource.getrlimit(resource.RLIMIT_NOFILE)[1]}) is too low"
        )
    left, right = socket.socketpair()
    high = FrameConnection(_socket_at(HIGH_FD, left))
    peer = FrameConnection(right)
    try:
        assert high.recv(time.monotonic() + 0.05) is None  # times out cleanly, no ValueError
        peer.send({"op": "ping"})
        assert high.recv(time.monotonic() + 5) == {"op": "ping"}
    finally:
        high.close()
        peer.close()


def test_raise_open_files_limit_reaches_the_hard_limit():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(256, hard), hard))
        raised = raise_open_files_limit()
        assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] == raised
        assert hard == resource.RLIM_INFINITY or raised == hard
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
