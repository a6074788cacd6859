"""The published image, run as a hub Space runs it, against the sandbox and gold-leak probes.

The image is built from the repository's Dockerfile (deploy/image/build.sh: a Debian
bookworm stand-in base where Docker Hub is out of reach) and started with `docker run`
as a Space does: no extra capabilities, Docker's default seccomp profile, the
Dockerfile's uid 1000, the token in the environment, the port published on 127.0.0.1.
Every probe of tests/probes.py then runs over the protocol. Each run option set is a
parameter, so it is visible which protections hold with which options:

| id | options | mode it should give |
|---|---|---|
| `space` | none (hub Spaces; Kubernetes `restricted` allows no more) | `landlock` |
| `userns` | `--security-opt seccomp=unconfined --security-opt systempaths=unconfined` | `userns` |
| `full` | `-u 0 --cap-add SYS_ADMIN --cap-add NET_ADMIN --security-opt seccomp=unconfined` | `full` |

Skipped, with the reason, when no Docker engine answers and none can be started
(tests/docker_engine.py: deploy/image/engine.sh needs root and Debian's docker.io);
.ci/image starts one, so it runs in CI. ANALYST_ENV_IMAGE=<tag> uses a built image
instead of building; ANALYST_ENV_IMAGE_RUNS=space,full picks option sets.
"""  # noqa: E501 - the options table row above cannot be split

from __future__ import annotations

import os

import probes
import pytest
from docker_engine import Container

pytestmark = pytest.mark.live
TOKEN = "image-probe-token-" + os.urandom(12).hex()
RUNS = {
    "space": ([], "landlock"),
    "userns": (
        ["--security-opt", "seccomp=unconfined", "--security-opt", "systempaths=unconfined"],
        "userns",
    ),
    "full": (
        [
            "-u",
            "0",
            "--cap-add",
            "SYS_ADMIN",
            "--cap-add",
            "NET_ADMIN",
            "--security-opt",
            "seccomp=unconfined",
        ],
        "full",
    ),
}
CHOSEN = [r for r in os.environ.get("ANALYST_ENV_IMAGE_RUNS", ",".join(RUNS)).split(",") if r]


@pytest.fixture(scope="module", params=CHOSEN)
def run(request, image):
    """The container for one option set, with the probes' Target for it."""
    options, mode = RUNS[request.param]
    container = Container(image, options, TOKEN)
    try:
        try:
            probes.wait_healthy(
                probes.Target(container.url, TOKEN, [], [], [], server_alive=container.running), 120
            )
        except AssertionError as exc:
            state = container.inspect()["State"]
            errors = [line for line in container.logs().splitlines() if "Error" in line][-4:]
            pytest.fail(
                f"{request.param}: {exc}; container {state['Status']} (exit "
                f"{state['ExitCode']}): {errors}"
            )
        package = container.exec(
            "python", "-c", "import analyst_env, os; print(os.path.dirname(analyst_env.__file__))"
        )
        assert package.returncode == 0, package.stderr
        package_dir = package.stdout.strip()
        network = container.inspect()["NetworkSettings"]
        ip, gateway = network["IPAddress"], network["Gateway"]
        secret = ["/app/env", package_dir, "/var/cache/analyst_env", "/var/lib/analyst_env"]
        # The image's task cache starts empty (generated sets are made there at run time; the
        # starter set is package data): a canary gives the file probes something to miss.
        planted = container.exec(
            "sh", "-c", "echo canary > /var/cache/analyst_env/canary", user="0"
        )
        assert planted.returncode == 0, planted.stderr
        target = probes.Target(
            url=container.url,
            token=TOKEN,
            secret_paths=secret,
            listen_addresses=[("127.0.0.1", 8000), (ip, 8000), (gateway, container.port)],
            # The image's user has /tmp as its home (Dockerfile): /tmp is the write probe's own.
            protected_write_dirs=["/", "/etc", "/home", "/usr/local/bin", "/var/tmp", *secret],
            exists_on_server=container.exists,
            server_alive=container.running,
        )
        yield request.param, mode, container, target
    finally:
        print(f"--- {request.param}: last log lines ---\n{container.logs()}")
        container.remove()


def test_runs_as_published(run):
    """The Dockerfile's user (uid 1000) serves; without a token the server would refuse 0.0.0.0."""
    name, _, container, _ = run
    uid = container.exec("sh", "-c", "cat /proc/1/status | grep ^Uid")
    expected = "0" if "-u" in RUNS[name][0] else "1000"
    assert uid.stdout.split()[1] == expected, uid.stdout


def test_sandbox_reports_the_mode_in_force(run):
    name, mode, container, target = run
    report = probes.sandbox_report(target)
    assert report["backend"] == "local"
    isolation = report["protections"].get("isolation")
    assert isolation == mode, report


def test_startup_names_the_mode(run):
    """The server's start-up output says which isolation mode is in force (what /sandbox
    reports)."""
    _, _, container, target = run
    isolation = probes.sandbox_report(target)["protections"].get("isolation")
    lines = [
        line
        for line in container.logs().splitlines()
        if "isolation" in line.lower() and str(isolation) in line
    ]
    assert lines, f"no start-up line names the isolation mode {isolation!r}"


def test_probe_targets_are_reachable_outside_the_sandbox(run):
    """Control: what the network probe must not reach is reachable from the container itself."""
    _, _, container, target = run
    for host, port in target.listen_addresses[:2]:
        reached = container.exec(
            "python",
            "-c",
            f"import socket; socket.create_connection(({host!r}, {port}), timeout=3)",
        )
        assert reached.returncode == 0, (
            f"{host}:{port} unreachable even outside the sandbox: {reached.stderr}"
        )


def test_protected_paths_hold_something_on_the_server_side(run):
    """Control: what the file probes must not read or write exists and is not empty for the
    server."""
    _, _, container, target = run
    for path in target.secret_paths:
        listed = container.exec("sh", "-c", f"ls -A {path} | head -1")
        assert listed.returncode == 0 and listed.stdout.strip(), (
            f"{path} is missing or empty in the image"
        )


@pytest.mark.parametrize("probe", probes.PROBES, ids=lambda p: p.__name__.removeprefix("probe_"))
def test_probe(run, probe):
    _, _, _, target = run
    probe(target)
