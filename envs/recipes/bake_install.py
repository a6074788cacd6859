"""The local bake's host-side steps: check the Debian packages, install the Python and npm ones.

Debian packages are only checked (``dpkg-query``), never installed. Python packages are
resolved by ``uv`` against the server's installed versions and only the difference goes
into the image's ``site/`` (``--no-deps``); npm packages go into a prefix. Neither runs
package code here unless the recipe opts in: ``uv`` gets ``--no-build`` (wheels only)
unless ``sdists``, ``npm`` gets ``--ignore-scripts`` unless ``npm_scripts``
(:mod:`analyst_env.envs.recipes.local_bake` says why).
"""

from __future__ import annotations

import importlib.metadata
import shutil
import subprocess
import sys
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from analyst_env.envs.recipes.bake_commands import BakeError, Log, Progress, run


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
