"""Reset and cell latency of the server image under given `docker run` options, over the protocol.

Starts the image with the options (token in the environment, port published on
127.0.0.1), waits for /health, then through the typed client times resets into a
starter task and trivial cells (`1 + 1`), as BENCHMARKS.md reports them; removes the
container. With --url it measures a server that is already running instead.

    python deploy/image/latency.py --image analyst-env:ci -- --security-opt seccomp=unconfined
    python deploy/image/latency.py --url http://127.0.0.1:8000 --token "$ANALYST_ENV_TOKEN"
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import time

import httpx

from analyst_env.client import AnalystEnv


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_healthy(url: str, timeout_s: float = 120) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return time.monotonic() - started
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise SystemExit(f"{url} not healthy after {timeout_s} s")


def _ms(values: list[float]) -> str:
    ms = [v * 1000 for v in values]
    return f"{statistics.median(ms):.1f} ms [{min(ms):.1f}–{max(ms):.1f}] n={len(ms)}"


def measure(url: str, token: str | None, resets: int, cells: int, task_id: str) -> dict:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    isolation = (
        httpx.get(url + "/sandbox", headers=headers, timeout=10)
        .json()["protections"]
        .get("isolation")
    )
    reset_s, cell_s = [], []
    with AnalystEnv(base_url=url, headers=headers).sync() as env:
        env.reset(task_id=task_id)  # warm-up: first connection, first standby
        env.add_and_execute_code_cell("1 + 1")
        for _ in range(resets):
            t = time.perf_counter()
            env.reset(task_id=task_id)
            reset_s.append(time.perf_counter() - t)
            for _ in range(cells):
                t = time.perf_counter()
                out = env.add_and_execute_code_cell("1 + 1").observation.text
                cell_s.append(time.perf_counter() - t)
                assert out == "2", out
            time.sleep(0.3)  # let the backend refill its standbys, as between real episodes
    return {"isolation": isolation, "reset": _ms(reset_s), "cell": _ms(cell_s)}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--image", help="image to run (with the docker options after --)")
    parser.add_argument("--url", help="measure this running server instead")
    parser.add_argument("--token", default=os.environ.get("ANALYST_ENV_TOKEN"))
    parser.add_argument("--resets", type=int, default=10)
    parser.add_argument("--cells", type=int, default=5, help="trivial cells after each reset")
    parser.add_argument("--task", default="starter-sales-000")
    parser.add_argument("docker_options", nargs="*")
    args = parser.parse_args()
    if args.url:
        print(json.dumps(measure(args.url, args.token, args.resets, args.cells, args.task)))
        return
    if not args.image:
        parser.error("--image or --url")
    token = args.token or os.urandom(16).hex()
    port = _free_port()
    name = f"analyst-env-latency-{port}"
    started = subprocess.run(
        [
            "docker",
            "run",
            "-d",
            "--name",
            name,
            "-e",
            f"ANALYST_ENV_TOKEN={token}",
            "-p",
            f"127.0.0.1:{port}:8000",
            *args.docker_options,
            args.image,
        ],
        capture_output=True,
        text=True,
    )
    if started.returncode != 0:
        raise SystemExit(
            f"docker run failed (DOCKER_HOST={os.environ.get('DOCKER_HOST')}): "
            f"{started.stderr.strip()}"
        )
    try:
        url = f"http://127.0.0.1:{port}"
        ready_s = _wait_healthy(url)
        result = {
            "options": " ".join(args.docker_options) or "(default)",
            "ready_s": round(ready_s, 1),
        }
        result.update(measure(url, token, args.resets, args.cells, args.task))
        print(json.dumps(result, ensure_ascii=False))
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True)


if __name__ == "__main__":
    main()
