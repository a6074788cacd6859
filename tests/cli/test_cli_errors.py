"""Mistakes on the ``analyst-env`` command line: one ``analyst-env: error:`` line, status 2.

Each mistake runs the installed script as a user runs it, in a subprocess. They are
started together (the ``answers`` fixture) because each spends its seconds importing, not
waiting. The ``serve`` mistakes run with ``--workers 2``: a check left to the workers
instead of the supervisor would answer with one line (or traceback) per worker.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from analyst_env import cli
from analyst_env.cli import build_parser, package_version
from analyst_env.cli_checks import missing_extra
from analyst_env.server.local_server import free_port

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))

from serve_process import ServeProcess  # noqa: E402

EXE = shutil.which("analyst-env") or str(Path(sys.executable).with_name("analyst-env"))

# name -> (arguments, what the one line says); {free}, {busy} filled in below. The mistakes
# `serve` must catch before its workers fork, and the one the issue saw as a 13-line traceback.
MISTAKES = {
    "procedural seed not an integer (the README's old MY_SEED)": (
        ["serve", "--workers", "2", "--port", "{free}", "--dataset", "procedural:MY_SEED"],
        "procedural:SEED needs an integer seed, got 'MY_SEED' (e.g. procedural:7)",
    ),
    "port in use": (["serve", "--workers", "2", "--port", "{busy}"], "is in use"),
    "missing optional extra": (
        ["serve", "--workers", "2", "--port", "{free}", "--backend", "docker"],
        "pip install 'analyst-env[docker]'",
    ),
    "unknown dataset": (["tasks", "--dataset", "nosuch"], "unknown dataset 'nosuch'"),
}

# The same rule for the other commands' mistakes, checked in this process (``cli.main``: the
# console script's own function) so each costs no second interpreter start; {missing} is a
# path that is not there.
IN_PROCESS = {
    "tasks:DIR that is not there": (["tasks", "--dataset", "tasks:{missing}"], "no folder"),
    "unknown split": (["validate", "--dataset", "procedural:7", "--split", "nope"], "no split"),
    "missing file": (["envs", "create", "x", "--file", "{missing}/r.toml"], "no such file"),
    "unreachable server URL": (
        ["eval", "--dataset", "starter", "--policy", "null", "--url", "http://127.0.0.1:{free}"],
        "cannot reach the server at http://127.0.0.1:",
    ),
    "--json under a file": (
        ["validate", "--dataset", "starter", "--json", "{file}/r.json"],
        "cannot write",
    ),
    "unknown flag": (["serve", "--prot", "8000"], "unrecognized arguments: --prot"),
    "validate --limit 0": (["validate", "--dataset", "starter", "--limit", "0"], "--limit must"),
    "unknown benchmark to prepare": (["datasets", "prepare", "nope", "."], "unknown benchmark"),
}


@pytest.fixture(scope="module")
def answers(tmp_path_factory):
    """Every mistake's (status, stdout, stderr), run at once."""
    root = tmp_path_factory.mktemp("cli-errors")
    # The docker SDK is installed here: a sitecustomize that hides it plays a machine without
    # the extra (importlib's find_spec answers None for a name mapped to None).
    blocker = root / "no-docker"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text("import sys\nsys.modules['docker'] = None\n")
    env = {**os.environ, "ANALYST_ENV_STATE_DIR": str(root / "state")}
    env.pop("ANALYST_ENV_TOKEN", None)
    busy = socket.socket()  # a port another server holds
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    fill = {"free": str(free_port()), "busy": str(busy.getsockname()[1])}
    procs = {}
    try:
        for name, (args, _) in MISTAKES.items():
            extra = {"PYTHONPATH": str(blocker)} if "extra" in name else {}
            procs[name] = subprocess.Popen(
                [EXE, *(a.format(**fill) for a in args)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env={**env, **extra},
                cwd=root,
            )
        return {name: (proc.wait(120), *proc.communicate()) for name, proc in procs.items()}
    finally:
        busy.close()
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()


@pytest.mark.parametrize("name", list(MISTAKES))
def test_a_mistake_is_one_error_line_and_status_2(answers, name):
    status, stdout, stderr = answers[name]
    lines = stderr.splitlines()
    assert status == 2, stderr
    assert len(lines) == 1 and lines[0].startswith("analyst-env: error: "), stderr
    assert MISTAKES[name][1] in lines[0]
    assert stdout == ""  # nothing started: no worker line, no served URL


@pytest.mark.parametrize("name", list(IN_PROCESS))
def test_every_command_answers_a_mistake_alike(tmp_path, capsys, monkeypatch, name):
    monkeypatch.setenv("ANALYST_ENV_STATE_DIR", str(tmp_path / "state"))
    (tmp_path / "a-file").write_text("")
    fill = {"free": str(free_port()), "missing": tmp_path / "nope", "file": tmp_path / "a-file"}
    args, says = IN_PROCESS[name]
    try:
        status = cli.main([a.format(**fill) for a in args])
    except SystemExit as exc:  # argparse's own mistakes leave through parser.exit
        status = exc.code
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert status == 2, captured.err
    assert len(lines) == 1 and lines[0].startswith("analyst-env: error: "), captured.err
    assert says in lines[0] and captured.out == ""


def test_version_is_the_installed_one(capsys):
    with pytest.raises(SystemExit) as done:
        cli.main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out == f"analyst-env {package_version()}\n"
    assert package_version() == __import__("analyst_env").__version__


def test_a_missing_extra_in_any_command_names_its_pip_install():
    """The net in ``main`` for an optional SDK imported deep inside a command: named with its
    extra; any other missing module (a broken install) keeps its traceback."""
    line = missing_extra(ModuleNotFoundError("No module named 'torch'", name="torch"))
    assert line == (
        "analyst-env: error: this needs the optional package 'torch': "
        "pip install 'analyst-env[trl]'"
    )
    assert missing_extra(ModuleNotFoundError("No module named 'pandas'", name="pandas")) is None


def test_help_shows_defaults_and_every_dataset_form(capsys):
    assert build_parser().description.rstrip().endswith("(docs/configuration.md).")
    with pytest.raises(SystemExit) as done:
        cli.main(["serve", "--help"])
    assert done.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "--port PORT TCP port (default: 8000)" in text
    assert "--host HOST Bind address (default: 127.0.0.1)" in text
    for form in ("starter", "procedural:SEED", "procedural:7", "tasks:DIR", "NAME:PATH"):
        assert form in text


@pytest.mark.live
def test_the_root_url_serve_prints_leads_to_the_web_ui(tmp_path):
    """``serve`` prints ``http://host:port``; opened in a browser it was a 404. The redirect
    and the icon are open under a token (they hold no data); everything else stays guarded."""
    with ServeProcess(tmp_path, "--dataset", "procedural:7", "--token", "t0k") as server:
        root = httpx.get(f"{server.url}/", timeout=10)
        assert root.status_code == 307 and root.headers["location"] == "/web"
        bootstrap = httpx.get(f"{server.url}/?token=t0k", timeout=10)
        assert bootstrap.headers["location"] == "/web?token=t0k"
        web = httpx.get(f"{server.url}/", follow_redirects=True, timeout=10)
        assert web.status_code == 200 and "<html" in web.text.lower()
        icon = httpx.get(f"{server.url}/favicon.ico", timeout=10)
        assert icon.status_code == 200 and icon.headers["content-type"] == "image/svg+xml"
        assert icon.content.startswith(b"<svg")
        assert httpx.get(f"{server.url}/metadata", timeout=10).status_code == 401
