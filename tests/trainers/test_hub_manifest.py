"""Hub publishing: the OpenEnv manifest validates and its declarations match what the server
serves."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from analyst_env.datasets import load_dataset
from analyst_env.server.tools import TOOLS

REPO = Path(__file__).resolve().parents[2]


def manifest() -> dict:
    return yaml.safe_load((REPO / "openenv.yaml").read_text())


def test_openenv_validate_static_passes():
    exe = shutil.which("openenv") or str(Path(sys.executable).parent / "openenv")
    proc = subprocess.run(
        [exe, "validate", str(REPO), "--level", "static"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Verdict: PASS" in proc.stdout


def test_declared_tools_and_task_counts_match_the_default_dataset():
    caps = manifest()["validation"]["capabilities"]
    assert set(caps["declared_tools"]) == set(TOOLS)
    starter = load_dataset("starter")
    assert caps["declared_task_count"] == {s: len(starter.split(s)) for s in starter.splits()}
    assert manifest()["validation"]["reward"]["range"] == [0.0, 1.0] and manifest()["port"] == 8000


def test_readme_front_matter_is_a_docker_space_with_the_web_base_path():
    text = (REPO / "README.md").read_text()
    front = yaml.safe_load(text.split("---")[1])
    assert front["sdk"] == "docker" and front["app_port"] == 8000
    assert front["base_path"] == "/web" and "openenv" in front["tags"]


def test_dockerfile_follows_openenvs_convention():
    text = (REPO / "Dockerfile").read_text()
    assert "EXPOSE 8000" in text and "/health" in text and "HEALTHCHECK" in text
    assert "\nUSER " in text  # not root
