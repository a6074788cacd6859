"""What a first episode on a relayed-runner backend (Daytona, Runloop) must show, checked one way.

The runner's code is uploaded to each new slot and unpacked under ``/opt/analyst_env``
(``envs/remote/relayed_runner.py``): a cell must import that copy, see the episode's
environment and task file, and a shell command must see the file too.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from analyst_env.envs.sandbox import Sandbox


def assert_the_uploaded_runner_serves(sandbox: Sandbox, root: str) -> None:
    """``sandbox`` was started with ``files={"data/sales.csv": ...}`` (the ``csv_file``
    fixture) and ``env={"K": "v"}``; ``root`` is the fake slot's directory."""
    result = sandbox.run_cell(
        "import os, analyst_env, pandas as pd\nprint(os.environ['K'], analyst_env.__file__)\n"
        "pd.read_csv('data/sales.csv').groupby('region').amount.sum()",
        timeout_s=30,
    )
    assert result.error is None, result.error
    name, package = result.stdout.split()
    assert name == "v" and package.startswith(root + "/opt/analyst_env/")
    assert "west    12.0" in result.outputs[0]["text/plain"]
    shell = sandbox.run_shell("wc -l < data/sales.csv", timeout_s=20)
    assert shell.stdout.strip() == "4" and shell.exit_code == 0


def wait_for(done: Callable[[], bool], timeout_s: float = 20) -> bool:
    """Poll ``done`` until it holds or ``timeout_s`` passed (a slot is deleted in the
    background); whether it held."""
    deadline = time.monotonic() + timeout_s
    while not done() and time.monotonic() < deadline:
        time.sleep(0.05)
    return done()
