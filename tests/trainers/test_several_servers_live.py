"""Live: a client given several replicas spreads new episodes by free slots and fails over.

Three real servers (uvicorn on loopback ports) stand for the replicas of a training
run. The typed client and the TRL adapter get all of them as one comma-separated
``base_url``: new episodes go to the replica with the most free session slots (as
``/ready`` counts them), a replica that refuses connections or is full is skipped, and
an episode stays on the replica it started on.
"""

from __future__ import annotations

import httpx
import pytest

from analyst_env.client import AnalystEnv
from analyst_env.client.endpoints import EndpointPool
from analyst_env.server.app import build_app
from analyst_env.server.local_server import BackgroundServer, free_port

pytestmark = pytest.mark.live
ANSWER = "7319.25"  # tiny-csv's answer


def live_sessions(url: str) -> int:
    return httpx.get(f"{url}/ready").json()["live_sessions"]


@pytest.fixture
def replicas(settings, runtime):
    def start(*max_sessions: int) -> list[str]:
        urls = []
        for limit in max_sessions:
            app = build_app(settings.model_copy(update={"max_sessions": limit}), runtime=runtime)
            server = BackgroundServer(app)
            urls.append(server.__enter__())
            started.append(server)
        return urls

    started: list[BackgroundServer] = []
    yield start
    for server in started:
        server.__exit__(None, None, None)


def test_new_episodes_spread_over_the_replicas_and_stay_on_theirs(replicas):
    urls = replicas(40, 40, 40)
    clients = [AnalystEnv(base_url=",".join(urls)).sync() for _ in range(6)]
    try:
        for client in clients:
            client.reset(task_id="tiny-csv")
        assert [live_sessions(u) for u in urls] == [2, 2, 2]
        homes = [client._base_url for client in clients]
        for client in clients:  # more steps and a new episode on the same connection
            client.add_and_execute_code_cell("x = 1")
            client.reset(task_id="tiny-csv")
        assert [client._base_url for client in clients] == homes
        assert clients[0].final_answer(ANSWER).reward == 1.0
    finally:
        for client in clients:
            client.close()


def test_a_replica_that_refuses_connections_is_skipped(replicas):
    urls = replicas(40, 40)
    dead = f"http://127.0.0.1:{free_port()}"
    clients = [AnalystEnv(base_url=[dead, *urls]).sync() for _ in range(4)]
    try:
        for client in clients:
            assert not client.reset(task_id="tiny-csv").done
        assert sum(live_sessions(u) for u in urls) == 4
        assert all(client._base_url in urls for client in clients)
    finally:
        for client in clients:
            client.close()


def test_a_reset_refused_by_a_full_replica_is_played_on_another(replicas, monkeypatch):
    full, roomy = replicas(1, 40)
    holder = AnalystEnv(base_url=full).sync()
    holder.reset(task_id="tiny-csv")  # the full replica's only slot, taken after the probe:
    monkeypatch.setattr(EndpointPool, "_probe", lambda self, url: 10 if url == full else 1)
    client = AnalystEnv(base_url=f"{full},{roomy}").sync()
    try:
        first = client.reset(task_id="tiny-csv")
        assert not first.done and client._base_url == roomy
        assert [live_sessions(full), live_sessions(roomy)] == [1, 1]
    finally:
        client.close()
        holder.close()


def test_the_trl_adapter_takes_several_replicas(replicas):
    from analyst_env.trainers.trl import AnalystSpec

    urls = replicas(40, 40)
    dead = f"http://127.0.0.1:{free_port()}"
    make_env = AnalystSpec(f"{dead},{urls[0]},{urls[1]}").environment_factory
    envs = [make_env() for _ in range(4)]
    try:
        for env in envs:
            env.reset(task_id="tiny-csv")
        assert [live_sessions(u) for u in urls] == [2, 2]
        envs[0].final_answer(answer=ANSWER)
        assert envs[0].get_reward() == 1.0
    finally:
        for env in envs:
            env._close()
