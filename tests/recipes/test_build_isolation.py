"""Builds never run package code on the host (issue 11): sdists, .pth files and npm scripts.

Each test publishes a package whose code, if it ran on the host, writes a marker file
at an absolute host path, then builds a recipe with it through the real local baker.
With the defaults the marker never appears: uv installs wheels only (an sdist's build
backend is never imported), npm runs no lifecycle scripts, and the import check (where
a wheel's ``.pth`` first executes) runs in an isolated episode sandbox, whose ``/tmp``
and root are its own. The opt-ins (``sdists``, ``npm_scripts``) show that the same
packages do run their code when a recipe asks for it, so the markers are live.
"""

from __future__ import annotations

import os
import shutil

import pytest
from recipes.pkgindex import NpmRegistry, PackageIndex

from analyst_env.envs.recipes.service import EnvironmentService


@pytest.fixture
def markers(tmp_path):
    path = tmp_path / "markers"
    path.mkdir()
    os.chmod(
        path, 0o777
    )  # writable by anyone: only isolation (not permissions) can keep a marker out
    return path


def build(state_dir, recipe: dict) -> tuple[dict, str]:
    service = EnvironmentService(state_dir)
    try:
        service.create(recipe)
        summary = service.wait(recipe["name"], 300)
        return summary, service.logs(recipe["name"])
    finally:
        service.close()


def test_an_sdist_build_backend_never_runs_on_the_host(state_dir, tmp_path, markers):
    marker = markers / "sdist-backend-ran"
    backend = (
        f"open({str(marker)!r}, 'w').write('build backend imported')\n"
        "def get_requires_for_build_wheel(config_settings=None):\n    return []\n"
        "def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):\n"
        "    raise RuntimeError('no wheel here')\n"
    )
    with PackageIndex(tmp_path / "index") as index:
        index.add_sdist(
            "evil-sdist",
            "1.0",
            {
                "pyproject.toml": "[build-system]\nrequires = []\nbuild-backend = "
                '"evil_backend"\nbackend-path = ["."]\n',
                "evil_backend.py": backend,
            },
        )
        summary, log = build(
            state_dir, {"name": "sdist", "pip": "evil-sdist==1.0", "pip_index_url": index.url}
        )
        assert summary["status"] == "failed", log
        assert "wheels only" in log
        assert not marker.exists(), "an sdist's build backend ran on the host"
        opted, _ = build(
            state_dir,
            {
                "name": "sdist-ok",
                "pip": "evil-sdist==1.0",
                "pip_index_url": index.url,
                "sdists": True,
            },
        )
        assert marker.exists(), "with sdists = true the backend runs (the marker is live)"


def test_a_wheel_pth_file_runs_only_inside_the_sandbox(state_dir, tmp_path, markers):
    marker = markers / "pth-ran"
    pth = (
        "import os, sys; "  # prints first: the write below fails where the host path does not exist
        "print('pth ran as uid', os.getuid(), 'host marker dir visible:', os.path.isdir("
        f"{str(markers)!r})); open({str(marker)!r}, 'w').write(str(os.getuid()))\n"
    )
    with PackageIndex(tmp_path / "index") as index:
        index.add(
            "evil-pth", "1.0", {"evil_pth/__init__.py": "VALUE = 1\n", "evil_pth_init.pth": pth}
        )
        summary, log = build(
            state_dir,
            {
                "name": "pth",
                "pip": "evil-pth==1.0",
                "pip_index_url": index.url,
                "preload": "evil_pth",
            },
        )
    assert summary["status"] == "ready", log
    assert "pth ran as uid" in log, (
        "the import check must process the wheel's .pth (inside the sandbox)"
    )
    assert not marker.exists(), "a wheel's .pth ran on the host during the build"
    assert "host marker dir visible: False" in log, "the sandbox saw the host's directories"
    if os.geteuid() == 0:
        ran_as = int(log.split("pth ran as uid", 1)[1].split()[0])
        assert ran_as != 0, "the .pth ran as root"


@pytest.mark.skipif(
    shutil.which("npm") is None, reason="npm is not installed (CI installs Debian's npm)"
)
def test_an_npm_postinstall_script_never_runs_on_the_host(state_dir, tmp_path, markers):
    marker = markers / "postinstall-ran"
    script = f"node -e \"require('fs').writeFileSync({str(marker)!r}, 'postinstall')\""
    with NpmRegistry(tmp_path / "npm") as registry:
        registry.add(
            "evil-post",
            "1.0.0",
            "evil-post",
            "console.log('hi');\n",
            scripts={"postinstall": script},
        )
        summary, log = build(
            state_dir, {"name": "npm", "npm": "evil-post@1.0.0", "npm_registry": registry.url}
        )
        assert summary["status"] == "ready", log
        assert not marker.exists(), "an npm postinstall script ran on the host"
        opted, log = build(
            state_dir,
            {
                "name": "npm-ok",
                "npm": "evil-post@1.0.0",
                "npm_registry": registry.url,
                "npm_scripts": True,
            },
        )
        assert opted["status"] == "ready", log
        assert marker.exists(), "with npm_scripts = true the script runs (the marker is live)"
