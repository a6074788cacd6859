"""Live: deploy/compose/compose.yaml itself, run by Compose on a real Docker engine (issue 18).

The published image (tests/docker_engine.py) and a stand-in for haproxy:2.6
(deploy/compose/haproxy-standin.sh: Docker Hub is out of reach) run the compose file
unchanged but for its variables: three replicas in the local sandbox's ``full``
isolation, HAProxy finding them through Docker's DNS. Through the balancer:

- 30 sessions spread over all three replicas, and their trajectories reach the shared
  volume;
- one replica crashes (SIGKILL of its process, from the host): its sessions see their
  connection closed, the others go on, Docker restarts it (``restart: unless-stopped``)
  and HAProxy gives it the next new sessions (it has the fewest);
- one replica stopped as Compose stops it (SIGTERM, ``stop_grace_period``) finishes the
  cell it is running and sends its reply, then closes its sessions and exits 0;
- ``down -v`` leaves no container, network or volume of the project.

Skipped, with the reason, without an engine or without Compose (v2's ``docker compose``
or v1's ``docker-compose``: Debian's package, which .ci/image installs).
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import shutil
import signal
import subprocess
from pathlib import Path

import httpx
import pytest
from deploy.balanced_sessions import Session, cell, reply
from deploy.polling import wait_for
from docker_engine import REPO, docker

from analyst_env.server.local_server import free_port

pytestmark = [pytest.mark.live, pytest.mark.timeout(900)]
COMPOSE_FILE = REPO / "deploy" / "compose" / "compose.yaml"
TOKEN = "compose-token-" + os.urandom(12).hex()
SESSIONS = 30


def compose_command() -> list[str] | None:
    """Compose v2 as a docker plugin, else v1's ``docker-compose``, else None."""
    if subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    return ["docker-compose"] if shutil.which("docker-compose") else None


class Stack:
    """One Compose project of compose.yaml, and what the test reads of it."""

    def __init__(self, compose: list[str], image: str, haproxy_image: str) -> None:
        self.project = f"analyst-env-compose-{os.getpid()}"
        self.port, self.stats_port = free_port(), free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._argv = [*compose, "-p", self.project, "-f", str(COMPOSE_FILE)]
        self._env = {
            **os.environ,
            "ANALYST_ENV_IMAGE": image,
            "HAPROXY_IMAGE": haproxy_image,
            "ANALYST_ENV_TOKEN": TOKEN,
            "ANALYST_ENV_PORT": str(self.port),
            "ANALYST_ENV_STATS_PORT": str(self.stats_port),
        }

    def compose(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        done = subprocess.run(
            [*self._argv, *args], env=self._env, capture_output=True, text=True, timeout=timeout
        )
        assert done.returncode == 0, f"compose {' '.join(args)}: {done.stderr[-3000:]}"
        return done

    def replicas(self) -> list[str]:
        """Container ids of the analyst-env service, running or not."""
        return self.compose("ps", "-q", "analyst-env").stdout.split()

    def inspect(self, container: str) -> dict:
        return json.loads(docker("inspect", container).stdout)[0]

    def address(self, container: str) -> str:
        networks = self.inspect(container)["NetworkSettings"]["Networks"]
        return next(iter(networks.values()))["IPAddress"]

    def servers(self) -> dict[str, tuple[str, str, int]]:
        """``{haproxy server name: (status, address, times it went down)}`` of the servers
        HAProxy resolved (the addresses are there because of ``stats show-legends``)."""
        try:
            text = httpx.get(f"http://127.0.0.1:{self.stats_port}/;csv", timeout=5).text
        except httpx.HTTPError:
            return {}
        rows = text.splitlines()
        header = rows[0].lstrip("# ").split(",")
        servers = {}
        for row in rows[1:]:
            cells = dict(zip(header, row.split(",")))
            address = cells.get("addr", "").rsplit(":", 1)[0]
            if cells.get("pxname") == "replicas" and address:
                servers[cells["svname"]] = (cells["status"], address, int(cells["chkdown"]))
        return servers

    def checked_servers(self) -> set[str]:
        """HAProxy servers whose last health check passed (``L7OK``). A server HAProxy has
        just resolved is shown UP before its first check, while its replica may still be
        starting."""
        try:
            text = httpx.get(f"http://127.0.0.1:{self.stats_port}/;csv", timeout=5).text
        except httpx.HTTPError:
            return set()
        rows = text.splitlines()
        header = rows[0].lstrip("# ").split(",")
        cells = [dict(zip(header, row.split(","))) for row in rows[1:]]
        return {
            c["svname"]
            for c in cells
            if c.get("pxname") == "replicas"
            and c.get("status") == "UP"
            and c.get("check_status") == "L7OK"
        }

    @staticmethod
    def answers_ready(address: str) -> bool:
        """Whether the replica at ``address`` (on the compose network, reachable from the
        host) answers its own readiness probe."""
        try:
            return httpx.get(f"http://{address}:8000/ready?local=1", timeout=5).status_code == 200
        except httpx.HTTPError:
            return False

    def up_servers(self) -> dict[str, str]:
        """``{haproxy server name: address}`` of the servers HAProxy sends connections to."""
        return {name: addr for name, (status, addr, _) in self.servers().items() if status == "UP"}

    def container_of(self, server: str) -> str:
        """The container behind HAProxy server ``server`` (matched by address)."""
        address = self.servers()[server][1]
        return next(c for c in self.replicas() if self.address(c) == address)

    def leftovers(self) -> dict[str, list[str]]:
        """Containers, networks and volumes that still carry the project's label."""
        label = f"label=com.docker.compose.project={self.project}"
        return {
            kind: docker(*command, "--filter", label, "-q").stdout.split()
            for kind, command in {
                "containers": ("ps", "-a"),
                "networks": ("network", "ls"),
                "volumes": ("volume", "ls"),
            }.items()
        }

    def logs(self) -> str:
        done = subprocess.run(
            [*self._argv, "logs", "--no-color", "--tail", "30"],
            env=self._env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        return done.stdout + done.stderr


@pytest.fixture(scope="module")
def stack(image):
    compose = compose_command()
    if compose is None:
        pytest.skip("no Compose (docker compose plugin or Debian's docker-compose)")
    made = subprocess.run(
        [str(REPO / "deploy/compose/haproxy-standin.sh")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert made.returncode == 0, made.stderr[-2000:]
    stack = Stack(compose, image, made.stdout.strip())
    try:
        stack.compose("up", "-d", "--no-build", "--scale", "analyst-env=3")
        wait_for(
            lambda: (
                len(stack.checked_servers()) == 3
                and all(stack.answers_ready(stack.address(c)) for c in stack.replicas())
            ),
            180,
            "HAProxy did not find three ready replicas through Docker's DNS",
            every_s=1,
        )
        yield stack
    finally:
        print(f"--- compose logs ---\n{stack.logs()}")
        stack.compose("down", "-v", "--remove-orphans", "-t", "60")


def test_the_balancer_image_stand_in_serves_the_shipped_config(stack):
    """The stand-in runs the shipped haproxy.cfg as haproxy:2.6 would: as its own user."""
    balancer = stack.compose("ps", "-q", "balancer").stdout.split()
    assert len(balancer) == 1
    user = docker("exec", balancer[0], "id", "-un").stdout.strip()
    version = docker("exec", balancer[0], "haproxy", "-v").stdout
    assert user == "haproxy" and "version 2.6" in version, (user, version)
    assert (
        Path(COMPOSE_FILE.parent / "haproxy.cfg").read_text()
        == docker("exec", balancer[0], "cat", "/usr/local/etc/haproxy/haproxy.cfg").stdout
    )


def test_compose_file_spreads_restarts_drains_and_leaves_nothing(stack):
    ws_url = stack.url.replace("http://", "ws://") + "/ws"
    assert httpx.get(f"{stack.url}/ready", timeout=10).status_code == 200

    async def scenario() -> None:
        sessions = [await Session.open(ws_url, TOKEN) for _ in range(SESSIONS)]
        spread = collections.Counter(s.replica for s in sessions)
        assert len(spread) == 3 and min(spread.values()) >= SESSIONS // 6, spread

        # A crash: the server process dies at once, as an OOM kill or a segfault ends it.
        victim_server = sessions[0].replica
        victim = stack.container_of(victim_server)
        on_victim = [s for s in sessions if s.replica == victim_server]
        others = [s for s in sessions if s.replica != victim_server]
        os.kill(stack.inspect(victim)["State"]["Pid"], signal.SIGKILL)
        outcomes = await asyncio.gather(*(s.lost() for s in on_victim))
        assert all(o.startswith("closed") for o in outcomes), collections.Counter(outcomes)
        for s in others:
            await s.ws.send(cell("print(40 + 2)"))
            assert "42" in json.dumps(await reply(s.ws))

        # Docker restarts it (its address may change). HAProxy's checks see it go down and
        # come back, or, when the restart is quicker than one check interval, never see it
        # down; either way the replica answers at the address HAProxy sends to. With the
        # fewest connections, it gets every new session for a while.
        seen: dict[str, object] = {}

        def restarted_and_back() -> str | None:
            state = stack.inspect(victim)
            seen.update(restarts=state["RestartCount"], state=state["State"]["Status"])
            if state["RestartCount"] < 1:
                return None
            address = stack.address(victim)
            seen.update(address=address, ready=stack.answers_ready(address))
            if not seen["ready"]:  # HAProxy may show it UP before it listens
                return None
            checked = stack.checked_servers()
            servers = stack.servers()
            seen.update(servers=servers, checked=sorted(checked))
            at_address = [name for name, (_, addr, _) in servers.items() if addr == address]
            return next((name for name in at_address if name in checked), None)

        try:
            back = await asyncio.to_thread(
                wait_for, restarted_and_back, 180, "the crashed replica did not rejoin", 1
            )
        except AssertionError as missing:
            raise AssertionError(f"{missing}; last seen: {seen}, victim {victim_server}") from None
        fresh = [await Session.open(ws_url, TOKEN) for _ in range(4)]
        assert {s.replica for s in fresh} == {back}, ([s.replica for s in fresh], back)

        # A stop, as `compose stop` does it: SIGTERM, then up to stop_grace_period. The cell
        # running on the stopped replica finishes and its reply is sent before the close.
        stopped_server = others[0].replica
        stopped = stack.container_of(stopped_server)
        assert stack.inspect(stopped)["Config"].get("StopTimeout") == 45
        runner = others[0]
        await runner.ws.send(cell("import time\ntime.sleep(3)\nprint('finished', 6 * 7)"))
        await asyncio.sleep(0.5)
        stopping = asyncio.create_task(asyncio.to_thread(docker, "stop", stopped, timeout=120))
        assert "finished 42" in json.dumps(await reply(runner.ws, timeout=60))
        assert (await runner.lost()).startswith("closed 1001")
        await stopping
        state = stack.inspect(stopped)["State"]
        assert (state["Status"], state["ExitCode"]) == ("exited", 0), state

        for s in [*others, *fresh]:
            if s.replica != stopped_server:
                await s.ws.close()

    asyncio.run(scenario())

    # Every replica wrote its episodes' trajectories into the one shared volume.
    survivor = next(c for c in stack.replicas() if stack.inspect(c)["State"]["Running"])
    listed = docker(
        "exec", survivor, "find", "/var/lib/analyst_env/trajectories", "-name", "*.jsonl"
    )
    assert len(listed.stdout.split()) >= SESSIONS, listed.stdout

    stack.compose("down", "-v", "--remove-orphans", "-t", "60")
    assert stack.leftovers() == {"containers": [], "networks": [], "volumes": []}
