"""The CoreWeave fake answers the real ``cwsandbox`` SDK, driven through the coreweave backend's
agent process (``coreweave_agent``): create, a live exec with streamed stdin, a command run to
completion, a file written, delete, and a wrong API key refused. Both the fake and the SDK run
in processes of their own; this one never imports ``grpc``."""

from __future__ import annotations

import time

import pytest

from analyst_env.envs.remote.coreweave_link import AgentRefused, CoreWeaveAgent, agent_environment


@pytest.fixture
def agent(coreweave_api):
    agent = CoreWeaveAgent(agent_environment(coreweave_api.api_key, coreweave_api.base_url))
    yield agent
    agent.close()


def _create(agent: CoreWeaveAgent) -> str:
    return agent.call("create", 20, image="python:3.11", cpus="1", memory="512Mi", lifetime_s=60.0)


def test_the_sdk_creates_runs_streams_and_deletes(agent, coreweave_api):
    sandbox = _create(agent)
    spec = coreweave_api.created()[-1]["spec"]
    assert spec["network"] == {"denyEgress": True, "denyIngress": True}
    assert (spec["tags"], spec["maxLifetimeSeconds"]) == (["analyst-env"], 60)
    (container,) = spec["containers"]
    assert container["image"] == "python:3.11"
    assert container["resourceRequirements"]["limits"] == {"cpu": "1", "memory": "512Mi"}
    agent.write_file(sandbox, "/work/bundle.bin", b"\x00\xffbytes", 10)
    code, output = agent.call("run", 10, sandbox=sandbox, command="wc -c < /work/bundle.bin")
    assert (code, output.strip()) == (0, "7")
    relay = "python -u -m analyst_env.envs.remote.line_relay cat"
    channel = agent.open_channel(sandbox, relay)
    channel.send(b"\x00frame\xff")
    received, deadline = b"", time.monotonic() + 10
    while len(received) < 7 and time.monotonic() < deadline:
        received += channel.recv(1.0) or b""
    assert received == b"\x00frame\xff"
    channel.close()
    agent.call("delete", 10, sandbox=sandbox)
    assert "StreamExec" in coreweave_api.methods()
    assert "DeleteSandbox" in coreweave_api.methods()
    assert not any(sandbox in folder for folder in coreweave_api.folders())


def test_a_wrong_api_key_is_refused(coreweave_api):
    agent = CoreWeaveAgent(agent_environment("wrong", coreweave_api.base_url))
    try:
        with pytest.raises(AgentRefused, match="Authentication failed"):
            agent.call("count", 10)
    finally:
        agent.close()
    assert coreweave_api.methods()[-1] == "ListSandboxes"  # refused there, nothing created
