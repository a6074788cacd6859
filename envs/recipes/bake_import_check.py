"""The local bake's import check: the image's preload modules imported inside an episode sandbox.

Importing is the first time a wheel's ``.pth`` files and a module's import-time code run,
so it happens inside an isolated episode sandbox, never in the server's interpreter
(:mod:`analyst_env.envs.recipes.local_bake`, "No package code runs on the host").
:func:`boot_code` is the ``sys.path`` set-up a baked image's zygote gets, so the check
imports what kernels will.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from analyst_env.envs.recipes.bake_commands import BakeError, Log


def boot_code(site_dirs: list[str], run: str) -> str:
    """Python source that puts ``site_dirs`` (with their .pth files) first on ``sys.path``, then
    runs ``run``.

    It mirrors how the local backend starts a baked image's zygote
    (``envs.local.zygote_client``), so the build's import check sees what kernels will.
    """
    return (
        "import site, sys\n"
        f"_dirs = {site_dirs!r}\n"
        "_before = list(sys.path)\n"
        "for _d in _dirs:\n"
        "    site.addsitedir(_d)\n"
        "sys.path[:] = [p for p in sys.path if p not in _before] + _before\n"
        f"{run}\n"
    )


def check_imports_in_sandbox(
    site_dirs: list[str], modules: list[str], log: Log, deadline: float
) -> None:
    """Import every preload module with the image's packages first, inside an isolated episode
    sandbox.

    This is where a wheel's ``.pth`` files and the modules' import-time code first run,
    so it must not be the server's interpreter, nor a zygote (which runs as the server's
    user). The image's site directory is handed to a kernel of the *default* image as
    a tar file (task files are copied into the sandbox's own tmpfs), unpacked there and
    imported by a fresh interpreter started by that kernel's shell: the kernel's uid, no
    network, its private root, seccomp and limits, like any episode. A private backend
    (no standbys) is started for it and closed after, so the server's zygotes are untouched.

    Raises:
        BakeError: A module failed to import (the message names it) or the sandbox failed.
    """
    import tarfile
    import tempfile

    from analyst_env.envs.local import LocalSandboxBackend
    from analyst_env.envs.sandbox import SandboxError

    log(f"checking the preload modules import in a sandboxed episode: {' '.join(modules)}")
    remaining = max(5.0, deadline - time.monotonic())
    with tempfile.TemporaryDirectory(prefix="analyst-env-check-") as scratch:
        bundle = Path(scratch) / "site.tar"
        with tarfile.open(bundle, "w") as tar:
            for i, site in enumerate(site_dirs):
                tar.add(site, arcname=f"site{i}")
        script = Path(scratch) / "check.py"
        script.write_text(
            "import os, tarfile\n"
            "with tarfile.open('site.tar') as _t:\n"
            "    _t.extractall('image', filter='data')\n"
            "_dirs = [os.path.abspath(os.path.join('image', 'site{}'.format(i))) "
            f"for i in range({len(site_dirs)})]\n"
            + boot_code([], "").replace("_dirs = []\n", "")
            + "import importlib\n"
            f"for _m in {modules!r}:\n"
            "    _mod = importlib.import_module(_m)\n"
            "    print('import', _m, 'from', getattr(_mod, '__file__', None) or 'built-in')\n"
        )
        backend = LocalSandboxBackend(standbys=0, boot_timeout_s=min(remaining, 300.0))
        try:
            sandbox = backend.start(
                "default", files={"site.tar": str(bundle), "check.py": str(script)}
            )
            try:
                result = sandbox.run_shell(
                    f"{sys.executable} -P check.py", timeout_s=min(remaining, 600.0)
                )
            finally:
                sandbox.close()
        except SandboxError as exc:
            raise BakeError(f"the import check's sandbox failed: {exc}") from None
        finally:
            backend.close()
    for line in (result.stdout + result.stderr).splitlines():
        log(line)
    if result.timed_out:
        raise BakeError("the import check did not finish before the build timeout")
    if result.exit_code != 0:
        tail = "\n".join(result.stderr.strip().splitlines()[-12:])
        raise BakeError(f"a preload module failed to import (checked in a sandbox):\n{tail}")
