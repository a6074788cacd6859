"""Bake a recipe for the local backend: a per-hash package directory layered over the server's.

The local backend runs kernels with the server's own interpreter, so a baked image is a
directory ``<builds>/<hash>/`` holding:

* ``site/``: the recipe's Python packages, installed by ``uv`` (from the recipe's index
  when it names one). The zygote puts it *in front of* the server's site-packages, so the
  recipe's versions win while analyst_env, IPython, pandas... still import. Only what the
  server lacks (or has at another version) is installed: the requirements are first
  resolved with the server's installed versions as constraints (falling back to a free
  resolution when the recipe pins other versions), then the difference is installed with
  ``--no-deps``. A data-science recipe therefore costs megabytes, not a second numpy.
* ``site/.npm/``: the npm packages (``npm install --prefix``); its ``node_modules/.bin``
  goes on the kernels' ``PATH``. It lives inside ``site/`` because the zygote's private
  root exposes exactly the directories on ``sys.path``; a dot-name is never importable.
* ``manifest.json``: what the local backend needs to start a zygote for the image.

Debian packages are not installed: they are checked on the host with ``dpkg-query`` and a
missing one fails the build, naming it. Every step's output goes to the build log; a
failing step's last lines become the build's error.

**No package code runs on the host.** Builds run as the server's user (root, with the
host's network and mounts), so nothing a package ships may execute there: ``uv`` gets
``--no-build`` (wheels only: an sdist's build backend would run on the host) unless the
recipe sets ``sdists = true``; ``npm`` gets ``--ignore-scripts`` (no ``preinstall``/
``postinstall``) unless it sets ``npm_scripts = true``; and the import check, the first
time a wheel's ``.pth`` files and the preload modules execute, runs as a cell of an
episode kernel of the new image, in the local sandbox backend with the isolation every
episode gets (private root, no network, own uid, seccomp). The two opt-ins run that
package code on the host and are for recipes whose packages the operator trusts.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from analyst_env.envs.recipes.install_plan import install_plan
from analyst_env.envs.recipes.recipe import Recipe

MANIFEST = "manifest.json"
NPM_DIR = ".npm"
#: Modules the default image preloads; a baked image preloads these plus the recipe's.
BASE_PRELOAD = ("numpy", "pandas", "duckdb", "matplotlib.pyplot", "openpyxl", "sqlite3")


class BakeError(RuntimeError):
    """A build step failed; the message is what the user needs to fix the recipe."""


Log = Callable[[str], None]
Progress = Callable[[float], None]


def _scaled(progress: Progress, start: float, span: float) -> Progress:
    """``progress`` for a step that reports 0..1 and covers ``[start, start + span]``."""
    return lambda f: progress(start + f * span)


def find_uv() -> str:
    """The ``uv`` executable: the one from the ``uv`` PyPI package, else one on ``PATH``."""
    try:
        from uv import find_uv_bin

        return find_uv_bin()
    except (ImportError, FileNotFoundError):
        found = shutil.which("uv")
        if found is None:
            raise BakeError(
                "uv is not installed; install analyst-env's dependencies (pip install uv)"
            ) from None
        return found


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


def bake(
    recipe: Recipe,
    out_dir: Path,
    *,
    log: Log,
    progress: Progress,
    timeout_s: float = 1800.0,
) -> dict:
    """Build ``recipe`` into ``out_dir`` (which must not exist) and return its manifest.

    The build happens in a sibling temporary directory renamed into place at the end, so
    ``out_dir`` exists only for complete builds.

    Raises:
        BakeError: A step failed (missing apt package, unknown pip package, npm error,
            a preload module that does not import).
    """
    deadline = time.monotonic() + timeout_s
    work = out_dir.with_name(f"{out_dir.name}.partial-{os.getpid()}")
    shutil.rmtree(work, ignore_errors=True)
    site_dir = work / "site"
    site_dir.mkdir(parents=True)
    try:
        progress(0.02)
        check_apt(recipe.apt, log)
        if recipe.apt_sources:
            log(
                "apt_sources is used by container backends only; "
                "the local backend checks the host's packages"
            )
        progress(0.1)
        plan = install_plan(recipe)
        pinned: dict[str, str] = {}
        for i, step in enumerate(plan.python):
            span = 0.6 / len(plan.python)
            start = 0.1 + i * span
            install_python(
                step.packages,
                step.index_url,
                step.label,
                site_dir,
                pinned,
                log,
                deadline,
                _scaled(progress, start, span),
                sdists=recipe.sdists,
            )
        progress(0.7)
        if plan.npm:
            install_npm(
                plan.npm,
                plan.npm_registry,
                site_dir / NPM_DIR,
                log,
                deadline,
                scripts=recipe.npm_scripts,
            )
        progress(0.85)
        manifest: dict[str, Any] = {
            "hash": recipe.image_hash(),
            "sizing": recipe.sizing(),
            "site_dirs": [str(out_dir / "site")],
            "path_dirs": [str(out_dir / "site" / NPM_DIR / "node_modules" / ".bin")]
            if recipe.npm
            else [],
            "preload": list(dict.fromkeys([*BASE_PRELOAD, *recipe.preload])),
            "recipe": recipe.canonical(),
        }
        check_imports_in_sandbox([str(site_dir)], manifest["preload"], log, deadline)
        (work / MANIFEST).write_text(json.dumps(manifest, indent=2))
        shutil.rmtree(out_dir, ignore_errors=True)
        work.rename(out_dir)
        progress(1.0)
        return manifest
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise


def check_apt(packages: list[str], log: Log) -> None:
    """Fail naming every Debian package that is not installed on this host."""
    if not packages:
        return
    names = [p.split("=", 1)[0] for p in packages]
    if shutil.which("dpkg-query") is None:
        raise BakeError(
            f"apt packages {', '.join(names)} cannot be checked: this host has no dpkg-query "
            "(the local backend only checks Debian packages, it never installs them)"
        )
    missing = []
    for name in names:
        result = subprocess.run(
            ["dpkg-query", "-W", "-f=${Status} ${Version}", name], capture_output=True, text=True
        )
        if result.returncode != 0 or "install ok installed" not in result.stdout:
            missing.append(name)
        else:
            log(f"apt: {name} {result.stdout.split()[-1]} is installed on the host")
    if missing:
        raise BakeError(
            f"apt packages not installed on this host: {', '.join(missing)}. The local backend "
            "does not install Debian packages: install them (apt-get install "
            f"{' '.join(missing)}) or remove them from the recipe"
        )


def server_versions() -> dict[str, str]:
    """``{canonical name: version}`` of what the server's interpreter has installed from an
    index."""
    versions: dict[str, str] = {}
    for dist in importlib.metadata.distributions():
        # The metadata is an email.message.Message, which has get; typeshed's PackageMetadata
        # declares it from Python 3.12 only.
        name = dist.metadata.get("Name")  # type: ignore[attr-defined]
        if not name or dist.read_text("direct_url.json"):
            continue  # editable or URL installs cannot be constraints
        versions.setdefault(canonicalize_name(name), dist.version)
    return versions


def install_python(
    requirements: list[str],
    index_url: str | None,
    label: str,
    site_dir: Path,
    pinned: dict[str, str],
    log: Log,
    deadline: float,
    progress: Progress,
    sdists: bool = False,
) -> None:
    """Resolve ``requirements`` against the server's packages, install what is missing into
    ``site_dir``.

    Wheels only (``--no-build``) unless ``sdists``: building an sdist runs its build backend here.
    """
    uv = find_uv()
    no_build = [] if sdists else ["--no-build"]
    work = site_dir.parent
    (work / f"{label}.in").write_text("\n".join(requirements) + "\n")
    installed = server_versions()
    constraints = {**installed, **pinned}
    (work / f"{label}-constraints.txt").write_text(
        "".join(f"{name}=={version}\n" for name, version in sorted(constraints.items()))
    )
    index = ["--index-url", index_url] if index_url else []
    base = [
        uv,
        "pip",
        "compile",
        str(work / f"{label}.in"),
        "--python",
        sys.executable,
        "--no-header",
        "--no-annotate",
        "--no-progress",
        "--color",
        "never",
        *no_build,
        *index,
    ]
    log(
        f"{label}: resolving {' '.join(requirements)}"
        + (f" from {index_url}" if index_url else "")
        + ("" if sdists else " (wheels only)")
    )
    try:
        out = run(
            base + ["--constraints", str(work / f"{label}-constraints.txt")],
            log,
            deadline,
            echo=False,
        )
    except BakeError:
        log(f"{label}: no resolution keeps the server's versions; resolving without them")
        out = run(base, log, deadline)
    progress(0.4)
    resolved = [
        line.strip() for line in out.splitlines() if line.strip() and not line.startswith("#")
    ]
    wanted = []
    for line in resolved:
        try:
            req = Requirement(line.split(" ;")[0])
        except InvalidRequirement:
            continue
        name = canonicalize_name(req.name)
        version = next((s.version for s in req.specifier if s.operator == "=="), None)
        if req.url is None and version is not None and installed.get(name) == version:
            continue
        if req.url is None and version is not None and pinned.get(name) == version:
            continue
        wanted.append(line)
        if version is not None:
            pinned[name] = version
    log(
        f"{label}: resolved {len(resolved)} distribution(s); "
        f"installing {len(wanted)} the server lacks: " + (" ".join(wanted) or "(none)")
    )
    if wanted:
        (work / f"{label}.txt").write_text("\n".join(wanted) + "\n")
        run(
            [
                uv,
                "pip",
                "install",
                "--target",
                str(site_dir),
                "--python",
                sys.executable,
                "--no-deps",
                "--no-progress",
                "--color",
                "never",
                "--link-mode",
                "copy",
                *no_build,
                *index,
                "-r",
                str(work / f"{label}.txt"),
            ],
            log,
            deadline,
        )
    progress(1.0)


def install_npm(
    packages: list[str],
    registry: str | None,
    prefix: Path,
    log: Log,
    deadline: float,
    scripts: bool = False,
) -> None:
    """``npm install`` the packages into ``prefix`` (its node_modules/.bin goes on PATH).

    Lifecycle scripts (``preinstall``, ``postinstall``, ...) are off unless ``scripts``:
    they run here.
    """
    npm = shutil.which("npm")
    if npm is None:
        raise BakeError(f"npm packages {', '.join(packages)} need npm, which this host lacks")
    prefix.mkdir(parents=True, exist_ok=True)
    registry_args = ["--registry", registry] if registry else []
    log(f"npm: installing {' '.join(packages)}" + (f" from {registry}" if registry else ""))
    script_args = [] if scripts else ["--ignore-scripts"]
    run(
        [
            npm,
            "install",
            "--prefix",
            str(prefix),
            "--no-audit",
            "--no-fund",
            "--no-save",
            "--update-notifier=false",
            "--loglevel",
            "warn",
            *script_args,
            *registry_args,
            *packages,
        ],
        log,
        deadline,
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


def run(
    argv: list[str], log: Log, deadline: float, *, echo: bool = True, cwd: str | None = None
) -> str:
    """Run one build command, logging its output; return stdout.

    Raises:
        BakeError: It exited non-zero (the message is its last output lines) or ran past the
            deadline.
    """
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise BakeError("the build ran out of time")
    log("$ " + " ".join([os.path.basename(argv[0]), *argv[1:]]))
    env = {**os.environ, "NO_COLOR": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    try:
        result = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=remaining,
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        raise BakeError(
            f"{os.path.basename(argv[0])} did not finish before the build timeout"
        ) from None
    except OSError as exc:
        raise BakeError(f"could not run {argv[0]}: {exc}") from None
    for line in result.stderr.splitlines():
        log(line)
    if echo:
        for line in result.stdout.splitlines():
            log(line)
    if result.returncode != 0:
        tail = "\n".join((result.stderr.strip() or result.stdout.strip()).splitlines()[-12:])
        raise BakeError(f"{os.path.basename(argv[0])} failed (exit {result.returncode}):\n{tail}")
    return result.stdout
