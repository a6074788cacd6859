"""Live: the typed client resumes a dropped episode without the caller noticing (issue 14, item 4).

The TCP connection is cut under the client (its socket shut down) or by a local
proxy, while a step runs, between steps, or with the step frame swallowed before it
reached the server. Each time the caller's step returns the step's own observation,
the cell ran exactly once, and the episode (variables, step count) goes on. When the
server stays unreachable past the grace period the call raises ``EpisodeLostError``.
"""

from __future__ import annotations

import time

import pytest
from tcp_cuts import DroppingProxy, client_socket, cut, later

from analyst_env.client.analyst_client import AnalystEnv
from analyst_env.client.resume import EpisodeLostError
from analyst_env.server.app import build_app
from analyst_env.server.local_server import BackgroundServer

pytestmark = pytest.mark.live
GRACE_S = 3.0
COUNT_RUNS = "runs = globals().get('runs', 0) + 1\nimport time\ntime.sleep({sleep})\nprint(runs)"


@pytest.fixture
def server(settings, runtime):
    app = build_app(
        settings.model_copy(update={"resume_grace_s": GRACE_S, "max_sessions": 3}), runtime=runtime
    )
    with BackgroundServer(app) as url:
        yield app, url


@pytest.fixture
def proxy(server):
    _, url = server
    proxy = DroppingProxy(int(url.rsplit(":", 1)[1]))
    yield proxy
    proxy.close()


def text(result) -> str:
    return result.observation.text.strip()


def test_a_cut_at_the_client_socket_mid_step_returns_that_steps_observation(server):
    app, url = server
    with AnalystEnv(base_url=url).sync() as env:
        env.reset(task_id="tiny-csv")
        later(0.4, cut, client_socket(env))
        assert text(env.add_and_execute_code_cell(COUNT_RUNS.format(sleep=1.5))) == "1"
        assert env.async_client.resumes == 1
        assert text(env.add_and_execute_code_cell("print(runs)")) == "1", "the cell ran once"
        assert env.state().step_count == 2
    deadline = time.monotonic() + 5
    while app.state.sessions and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not app.state.sessions, "the closed client left its session behind"


def test_a_step_running_longer_than_the_grace_period_is_still_resumed(settings, runtime):
    """The grace period starts when the old connection lets go (after its step), not at the cut:
    every "still attached, retry" answer says the episode is alive."""
    grace_s = 1.0  # the cell (3.5 s, under the 5 s cell limit) outlasts it and the client's slack
    update = {"resume_grace_s": grace_s, "max_sessions": 3}
    app = build_app(settings.model_copy(update=update), runtime=runtime)
    with BackgroundServer(app) as url, AnalystEnv(base_url=url).sync() as env:
        env.reset(task_id="tiny-csv")
        later(0.4, cut, client_socket(env))
        result = env.add_and_execute_code_cell(COUNT_RUNS.format(sleep=3.5))
        assert text(result) == "1" and env.async_client.resumes == 1
        assert text(env.add_and_execute_code_cell("print(runs)")) == "1", "the cell ran once"


def test_a_proxy_dropping_mid_step_and_while_idle_goes_unnoticed(proxy):
    with AnalystEnv(base_url=proxy.url()).sync() as env:
        env.reset(task_id="tiny-sqlite")
        later(0.4, proxy.drop)
        assert text(env.add_and_execute_code_cell(COUNT_RUNS.format(sleep=1.5))) == "1"
        proxy.drop()  # between steps, while the caller "thinks"
        time.sleep(0.3)
        assert text(env.add_and_execute_code_cell("print(runs)")) == "1"
        proxy.partition()  # half-open while idle: the server still waits on the old connection
        time.sleep(0.3)
        assert text(env.add_and_execute_code_cell("print(runs)")) == "1"
        assert env.async_client.resumes == 3
        assert env.state().step_count == 3


def test_a_step_that_never_reached_the_server_is_sent_again_once(proxy):
    with AnalystEnv(base_url=proxy.url()).sync() as env:
        env.reset(task_id="tiny-csv")
        proxy.swallow(True)  # the step frame below is lost on the way

        def lose_it():
            proxy.swallow(False)
            proxy.drop()

        later(0.5, lose_it)
        assert text(env.add_and_execute_code_cell(COUNT_RUNS.format(sleep=0))) == "1"
        assert text(env.add_and_execute_code_cell("print(runs)")) == "1"
        assert env.state().step_count == 2


def test_an_unreachable_server_past_the_grace_period_raises_a_clear_error(proxy):
    with AnalystEnv(base_url=proxy.url()).sync() as env:
        episode = env.reset(task_id="tiny-csv").observation.episode_id
        proxy.refuse(True)
        proxy.drop()
        started = time.monotonic()
        with pytest.raises(EpisodeLostError) as lost:
            env.add_and_execute_code_cell("1 + 1")
        assert GRACE_S <= time.monotonic() - started < GRACE_S + 10
        assert episode in str(lost.value) and "Reset to start a new episode" in str(lost.value)
        proxy.refuse(False)
        time.sleep(0.5)
        with pytest.raises(EpisodeLostError, match="grace period"):  # the server closed it
            env.add_and_execute_code_cell("1 + 1")
        assert env.reset(task_id="tiny-csv").observation.episode_id != episode
        assert text(env.add_and_execute_code_cell("print(6 * 7)")) == "42"


def test_resume_false_keeps_openenvs_plain_behaviour(proxy):
    with AnalystEnv(base_url=proxy.url(), resume=False).sync() as env:
        first = env.reset(task_id="tiny-csv")
        assert "resume_secret" not in (first.metadata or {})
        proxy.drop()
        time.sleep(0.3)
        fresh = env.add_and_execute_code_cell("1 + 1")  # a fresh socket is a fresh session
        assert "not been reset" in text(fresh)
