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

This module orders the steps and writes the manifest; the steps live beside it:
``bake_install`` (the apt check, ``uv`` and ``npm``), ``bake_import_check`` (the import
check in a sandbox) and ``bake_commands`` (``BakeError``, the log and progress callbacks,
running one host command).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

from analyst_env.envs.recipes.bake_commands import Log, Progress
from analyst_env.envs.recipes.bake_import_check import check_imports_in_sandbox
from analyst_env.envs.recipes.bake_install import check_apt, install_npm, install_python
from analyst_env.envs.recipes.install_plan import install_plan
from analyst_env.envs.recipes.recipe import Recipe

MANIFEST = "manifest.json"
NPM_DIR = ".npm"
#: Modules the default image preloads; a baked image preloads these plus the recipe's.
BASE_PRELOAD = ("numpy", "pandas", "duckdb", "matplotlib.pyplot", "openpyxl", "sqlite3")


def _scaled(progress: Progress, start: float, span: float) -> Progress:
    """``progress`` for a step that reports 0..1 and covers ``[start, start + span]``."""
    return lambda f: progress(start + f * span)


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
