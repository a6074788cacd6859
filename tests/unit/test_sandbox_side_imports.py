"""The code that runs inside a remote image imports only what the image installs.

A Docker, Modal, E2B or Daytona image holds the recipe's packages plus ``RUNNER_REQUIREMENTS``
(``envs/remote/runner_image.py``), not the server's dependencies. An import of one of
those from the runner's side (``greenlet`` through the server's event-loop bridge, once)
makes every slot die at start in a real image, which no fake notices: here each
server-only package is made unimportable and the runner's modules are imported.
"""

import subprocess
import sys

SERVER_ONLY = (
    "greenlet",
    "fastapi",
    "starlette",
    "uvicorn",
    "openenv",
    "fastmcp",
    "mcp",
    "gradio",
    "httpx",
    "websockets",
    "docker",
    "modal",
    "e2b",
    "daytona",
)
SANDBOX_SIDE = (
    "analyst_env.envs.remote.runner",
    "analyst_env.envs.remote.slot_server",
    "analyst_env.envs.remote.line_relay",
    "analyst_env.envs.kernel.child",
)


def test_the_runner_side_imports_without_the_server_packages():
    code = (
        "import sys\n"
        f"for name in {SERVER_ONLY!r}:\n"
        "    sys.modules[name] = None  # import raises ModuleNotFoundError\n"
        "import importlib\n"
        f"for module in {SANDBOX_SIDE!r}:\n"
        "    importlib.import_module(module)\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
