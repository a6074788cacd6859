"""Live: an episode survives a dropped connection and resumes with its secret (issue 14, item 4).

The TCP connection of a ``?resume=1`` socket is cut while a step runs: at the client's
socket (shut down and closed, no WebSocket close frame), or by a local TCP proxy that
drops both of its connections. Reconnecting with the episode
id and the resume secret from the reset's metadata continues the same episode: the
first frame is the observation of the step that finished meanwhile, variables and the
step count are intact. A wrong secret, or a resume after the grace period, gets a
clear error, and the expired session's slot is free again.
"""

from __future__ import annotations

import json
import time

import pytest
from support import code_step
from tcp_cuts import DroppingProxy
from tcp_cuts import cut as cut_tcp
from websockets.sync.client import connect

from analyst_env.server.app import build_app
from analyst_env.server.local_server import BackgroundServer

# The dropped socket is cut under the client, so it is not used as a context manager.
pytestmark = [
    pytest.mark.live,
    pytest.mark.filterwarnings("ignore:connect\\(\\) must be used as a context manager"),
]
GRACE_S = 3.0


def code(source: str) -> str:
    """The step frame running ``source`` as a cell, as JSON text."""
    return json.dumps(code_step(source))


def cut(sock) -> None:
    """Drop the TCP connection under the client, as a network failure would (no close frame)."""
    raw = sock.socket
    cut_tcp(raw)
    raw.close()


def open_resumable(ws: str, task_id: str):
    """A ``?resume=1`` socket reset into ``task_id``, and the reset's ``data``."""
    sock = connect(f"{ws}?resume=1")
    sock.send(json.dumps({"type": "reset", "data": {"task_id": task_id}}))
    return sock, json.loads(sock.recv(timeout=30))["data"]


@pytest.fixture
def server(settings, runtime):
    app = build_app(
        settings.model_copy(update={"resume_grace_s": GRACE_S, "max_sessions": 2}), runtime=runtime
    )
    with BackgroundServer(app) as url:
        yield app, url.replace("http://", "ws://") + "/ws"


def test_a_dropped_episode_resumes_with_its_secret(server):
    app, ws = server
    sock, first = open_resumable(ws, "tiny-csv")
    episode_id, secret = first["observation"]["episode_id"], first["metadata"]["resume_secret"]
    assert first["observation"]["metadata"]["resume_secret"] == secret
    sock.send(code("kept = 'across the cut'"))
    json.loads(sock.recv(timeout=30))
    sock.send(code("import time\ntime.sleep(1.5)\nprint('finished while away')"))
    time.sleep(0.3)
    cut(sock)

    with connect(f"{ws}?episode_id={episode_id}&resume_secret=wrong") as intruder:
        refused = json.loads(intruder.recv(timeout=30))
    assert (
        refused["data"]["code"] == "SESSION_ERROR"
        and "resume secret is wrong" in refused["data"]["message"]
    )

    time.sleep(1.8)  # the step finishes while no socket is attached
    with connect(f"{ws}?episode_id={episode_id}&resume_secret={secret}") as back:
        missed = json.loads(back.recv(timeout=30))
        assert missed["data"]["observation"]["result"]["data"] == "finished while away"
        back.send(code("print(kept)"))
        assert (
            json.loads(back.recv(timeout=30))["data"]["observation"]["result"]["data"]
            == "across the cut"
        )
        back.send(json.dumps({"type": "state"}))
        state = json.loads(back.recv(timeout=30))["data"]
        assert state["episode_id"] == episode_id and state["step_count"] == 3
        back.send(json.dumps({"type": "close"}))
    deadline = time.monotonic() + 5
    while app.state.sessions and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not app.state.sessions, "a closed session was kept"


def test_after_the_grace_period_the_episode_is_closed_and_a_resume_is_refused(server):
    app, ws = server
    sock, first = open_resumable(ws, "tiny-csv")
    episode_id, secret = first["observation"]["episode_id"], first["metadata"]["resume_secret"]
    cut(sock)
    time.sleep(0.5)
    assert len(app.state.sessions) == 1, "the parked episode keeps its slot"
    time.sleep(GRACE_S + 0.5)
    assert not app.state.sessions, "the parked session outlived its grace period"
    with connect(f"{ws}?episode_id={episode_id}&resume_secret={secret}") as late:
        refused = json.loads(late.recv(timeout=30))
    assert (
        refused["data"]["code"] == "SESSION_ERROR"
        and "grace period (3 s) has passed" in refused["data"]["message"]
    )


def test_a_socket_without_resume_closes_its_episode_when_it_drops(server):
    app, ws = server
    sock = connect(ws)
    sock.send(json.dumps({"type": "reset", "data": {"task_id": "tiny-csv"}}))
    first = json.loads(sock.recv(timeout=30))["data"]
    assert "resume_secret" not in first.get("metadata", {})
    cut(sock)
    deadline = time.monotonic() + 5
    while app.state.sessions and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not app.state.sessions


def test_a_proxy_dropping_the_connection_mid_step_loses_nothing(server):
    app, ws = server
    port = int(ws.rsplit(":", 1)[1].split("/")[0])
    proxy = DroppingProxy(port)
    try:
        sock = connect(f"ws://127.0.0.1:{proxy.port}/ws?resume=1")
        sock.send(json.dumps({"type": "reset", "data": {"task_id": "tiny-sqlite"}}))
        first = json.loads(sock.recv(timeout=30))["data"]
        episode_id, secret = first["observation"]["episode_id"], first["metadata"]["resume_secret"]
        sock.send(
            code("import time\nnote = 'before the drop'\ntime.sleep(1.5)\nprint('done mid-drop')")
        )
        time.sleep(0.4)
        proxy.drop()  # mid-step: both TCP connections through the proxy are cut
        time.sleep(1.8)
        with connect(
            f"ws://127.0.0.1:{proxy.port}/ws?episode_id={episode_id}&resume_secret={secret}"
        ) as back:
            assert (
                json.loads(back.recv(timeout=30))["data"]["observation"]["result"]["data"]
                == "done mid-drop"
            )
            back.send(code("print(note)"))
            assert (
                json.loads(back.recv(timeout=30))["data"]["observation"]["result"]["data"]
                == "before the drop"
            )
            back.send(json.dumps({"type": "state"}))
            assert json.loads(back.recv(timeout=30))["data"]["step_count"] == 2
    finally:
        proxy.close()


def test_a_resume_while_the_old_connection_still_runs_its_step_is_told_to_retry(server):
    _, ws = server
    sock, first = open_resumable(ws, "tiny-csv")
    episode_id, secret = first["observation"]["episode_id"], first["metadata"]["resume_secret"]
    assert first["metadata"]["resume_grace_s"] == GRACE_S
    sock.send(code("import time\ntime.sleep(1.5)\nprint('slow')"))
    time.sleep(0.3)
    cut(sock)
    with connect(f"{ws}?episode_id={episode_id}&resume_secret={secret}") as early:
        busy = json.loads(early.recv(timeout=30))["data"]
    assert busy["code"] == "SESSION_ERROR" and busy["retry"] is True
    assert "still attached" in busy["message"]
    time.sleep(1.8)
    with connect(f"{ws}?episode_id={episode_id}&resume_secret={secret}") as back:
        assert json.loads(back.recv(timeout=30))["data"]["observation"]["result"]["data"] == "slow"
        back.send(json.dumps({"type": "close"}))


def test_a_reply_lost_in_a_dead_connection_is_sent_again_when_seen_says_it_was_missed(server):
    """The step ran and its reply was written, but the client never read it (a half-open link)."""
    _, ws = server
    sock, first = open_resumable(ws, "tiny-csv")
    episode_id, secret = first["observation"]["episode_id"], first["metadata"]["resume_secret"]
    sock.send(code("runs = globals().get('runs', 0) + 1\nprint(runs)"))
    json.loads(sock.recv(timeout=30))  # delivered; the client below behaves as if it were lost
    cut(sock)
    time.sleep(0.3)
    back = connect(f"{ws}?episode_id={episode_id}&resume_secret={secret}&seen=0")
    replayed = json.loads(back.recv(timeout=30))["data"]
    assert replayed["observation"]["result"]["data"] == "1", "the last step reply is sent again"
    cut(back)
    time.sleep(0.3)
    with connect(f"{ws}?episode_id={episode_id}&resume_secret={secret}&seen=1") as again:
        again.send(json.dumps({"type": "state"}))
        state = json.loads(again.recv(timeout=30))
        assert state["type"] == "state" and state["data"]["step_count"] == 1, "nothing is replayed"
        again.send(code("print(runs)"))
        assert json.loads(again.recv(timeout=30))["data"]["observation"]["result"]["data"] == "1"
        again.send(json.dumps({"type": "close"}))
