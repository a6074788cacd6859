"""HAProxy in front of local ``analyst-env serve`` processes, with the shipped config.

The shipped configuration finds replicas through Docker's DNS; here its
``server-template`` line and resolvers become one ``server`` line per local port
and the binds move to free loopback ports. Everything else (balancing, health
checks on ``/ready``, WebSocket timeouts, the replica header) is the file as shipped.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import httpx
from deploy.polling import wait_for

from analyst_env.server.local_server import free_port

SHIPPED = Path(__file__).resolve().parents[2] / "deploy" / "compose" / "haproxy.cfg"


def local_config(replica_ports: list[int], port: int, stats_port: int) -> str:
    """The shipped configuration with loopback binds and ``server rN 127.0.0.1:PORT`` lines."""
    text = SHIPPED.read_text()
    text = text.replace("    bind :8000\n", f"    bind 127.0.0.1:{port}\n")
    text = text.replace("    bind :8404\n", f"    bind 127.0.0.1:{stats_port}\n")
    text = re.sub(r"\nresolvers docker\n(    .*\n)+", "\n", text)
    servers = "".join(f"    server r{i} 127.0.0.1:{p}\n" for i, p in enumerate(replica_ports))
    text, replaced = re.subn(r"    server-template .*\n", servers, text)
    assert replaced == 1 and "resolvers" not in text, "deploy/compose/haproxy.cfg changed shape"
    return text


class HAProxyProcess:
    """``with HAProxyProcess(tmp_path, ports) as lb:`` balances ``lb.url`` over the replicas."""

    def __init__(self, root: Path, replica_ports: list[int]) -> None:
        self.root = Path(root)
        self.port, self.stats_port = free_port(), free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.config = self.root / "haproxy.cfg"
        self.config.write_text(local_config(replica_ports, self.port, self.stats_port))
        self.log_path = self.root / "haproxy.log"
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> HAProxyProcess:
        binary = shutil.which("haproxy")
        assert binary, "haproxy is not installed"
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [binary, "-db", "-f", str(self.config)], stdout=self._log, stderr=subprocess.STDOUT
        )

        def passes_requests() -> bool:
            if self.proc.poll() is not None:
                raise RuntimeError(f"haproxy exited: {self.log_path.read_text()}")
            try:
                return httpx.get(f"{self.url}/ready", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        try:
            wait_for(passes_requests, 30, "haproxy did not pass requests to a replica")
        except BaseException:
            self.__exit__()
            raise
        return self

    def server_states(self) -> dict[str, str]:
        """``{"r0": "UP" | "DOWN" | ..., ...}`` from the statistics page's CSV."""
        rows = httpx.get(f"http://127.0.0.1:{self.stats_port}/;csv", timeout=5).text.splitlines()
        header = rows[0].lstrip("# ").split(",")
        states = {}
        for row in rows[1:]:
            cells = dict(zip(header, row.split(",")))
            if cells.get("pxname") == "replicas" and cells.get("svname", "").startswith("r"):
                states[cells["svname"]] = cells["status"]
        return states

    def __exit__(self, *exc) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._log.close()
