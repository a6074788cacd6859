"""The README's commands run as written: every ``analyst-env`` line and the client snippet.

The code blocks are read from README.md at test time, so a command added there is
tried here without editing this file. Each ``analyst-env`` line runs in a scratch
directory (outputs such as ``r.json`` land there), with ``../shared/datasets``
pointing at the shared benchmark folder and an upstream clone the README names
(``InfiAgent``) played by the shared copy laid out as upstream keeps it; a line
whose data is absent is skipped.
Only what would take minutes or a network is shortened, and only in the ways
listed in ``_shortened`` (the command is otherwise exactly the README's): ``eval``
and ``validate`` get ``--limit``, ``generate`` a small ``--count``, ``serve`` a free
port and a probe of ``/health``. Lines that need a model, Docker or an hour
(``bench``, ``eval --model``, ``docker``) are skipped with the reason. The Python
blocks that use the client run against a live ``analyst-env serve``.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from server.serve_process import ServeProcess
from support import SHARED_DATASETS

from analyst_env.server.local_server import free_port

README = Path(__file__).resolve().parents[2] / "README.md"
EXE = str(Path(sys.executable).with_name("analyst-env"))
UPSTREAM_CLONES = {"InfiAgent": ("dabench", "examples/DA-Agent/data")}  # clone -> shared data
SKIPPED = {  # first words -> why the line is not run here
    "bench": "a benchmark run takes minutes (the bench suite runs `bench --quick`)",
    "export": "covered by tests/trainers/test_harbor_export.py",
}


def _blocks(language: str) -> list[str]:
    text = README.read_text(encoding="utf-8")
    return re.findall(rf"^```{language}\n(.*?)^```", text, flags=re.S | re.M)


def _commands() -> list[str]:
    lines = []
    for block in _blocks("bash"):
        for line in block.splitlines():
            line = line.split("  #", 1)[0].strip()
            if line.startswith("analyst-env "):
                lines.append(line)
    return lines


def _shortened(argv: list[str]) -> list[str]:
    """The README's command with only its cost reduced (see the module docstring)."""
    command = argv[1]
    if command in ("eval", "validate") and "--limit" not in argv:
        return [*argv, "--limit", "3"]
    if command == "generate" and "--count" in argv:
        i = argv.index("--count")
        return [*argv[: i + 1], "3", *argv[i + 2 :]]
    return argv


def test_the_readme_has_commands_to_run():
    commands = _commands()
    assert any(c.startswith("analyst-env serve") for c in commands)
    assert any(c.startswith("analyst-env eval") for c in commands)


@pytest.mark.parametrize("line", _commands())
def test_each_analyst_env_line_runs_as_written(line, tmp_path):
    argv = shlex.split(line.replace("../shared/datasets", str(SHARED_DATASETS)))
    if argv[1] in SKIPPED:
        pytest.skip(SKIPPED[argv[1]])
    if "--model" in argv:
        pytest.skip("needs a model endpoint (tests/eval runs a stand-in model)")
    for arg in argv:
        if str(SHARED_DATASETS) in arg and not Path(arg.split(":", 1)[-1]).exists():
            pytest.skip(f"benchmark data absent: {arg}")
    for clone, (shared, inside) in UPSTREAM_CLONES.items():
        if (
            clone in line
        ):  # the README's `git clone`, played by the shared copy laid out as upstream
            if not (SHARED_DATASETS / shared).is_dir():
                pytest.skip(f"benchmark data absent: {SHARED_DATASETS / shared}")
            shutil.copytree(SHARED_DATASETS / shared, tmp_path / clone / inside)
    env = {**os.environ, "TMPDIR": str(tmp_path), "ANALYST_ENV_STATE_DIR": str(tmp_path / "s")}
    if argv[1] == "serve":
        port = free_port()
        proc = subprocess.Popen(
            [EXE, *argv[1:], "--port", str(port)],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        try:
            for _ in range(1200):
                assert proc.poll() is None, proc.stdout.read().decode(errors="replace")
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                time.sleep(0.1)
            raise AssertionError(f"{line!r} did not become healthy")
        finally:
            proc.kill()
            proc.wait(timeout=30)
    done = subprocess.run(
        [EXE, *_shortened(argv)[1:]],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, f"{line!r} exited {done.returncode}:\n{done.stderr[-3000:]}"


def test_the_client_snippet_runs_against_a_live_server(tmp_path):
    snippets = [b for b in _blocks("python") if "AnalystEnv(" in b]
    assert snippets, "the README shows the client"
    with ServeProcess(tmp_path) as server:
        for code in snippets:
            code = code.replace("http://127.0.0.1:8000", server.url)
            done = subprocess.run(
                [sys.executable, "-c", code],
                cwd=tmp_path,
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert done.returncode == 0, done.stderr[-3000:]
            assert done.stdout.strip(), "the snippet prints what it got"
