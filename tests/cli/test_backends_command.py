"""``analyst-env backends``: every backend listed, with what it still needs on this host."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from analyst_env.cli import main
from analyst_env.envs import backend_catalog
from analyst_env.envs.backend_catalog import BACKEND_CATALOG, BackendInfo, readiness
from analyst_env.envs.backends import BACKENDS

CREDENTIALS = ("E2B_API_KEY", "MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET", "DOCKER_HOST")


@pytest.fixture
def bare_host(monkeypatch, tmp_path):
    """No credential variable set and an empty home (no SDK login file)."""
    for name in CREDENTIALS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


def listed(capsys) -> dict[str, dict]:
    assert main(["backends", "--json"]) == 0
    return {row["name"]: row for row in json.loads(capsys.readouterr().out)}


def test_every_registered_backend_is_described():
    assert set(BACKEND_CATALOG) == set(BACKENDS)


def test_missing_credentials_are_named(bare_host, capsys):
    rows = listed(capsys)
    assert list(rows) == list(BACKENDS)
    assert rows["local"]["usable"] and rows["local"]["missing"] == []
    assert rows["e2b"]["installed"] and rows["e2b"]["missing"] == ["set E2B_API_KEY"]
    assert rows["modal"]["missing"] == ["set MODAL_TOKEN_ID, MODAL_TOKEN_SECRET (or ~/.modal.toml)"]


def test_a_variable_or_the_sdks_login_file_is_enough(bare_host, monkeypatch):
    monkeypatch.setenv("E2B_API_KEY", "e2b_test")
    assert readiness("e2b").usable
    monkeypatch.setenv("MODAL_TOKEN_ID", "ak-1")
    assert readiness("modal").missing == ("set MODAL_TOKEN_SECRET (or ~/.modal.toml)",)
    (bare_host / ".modal.toml").write_text("[default]\n")
    assert readiness("modal").usable


def test_an_sdk_that_is_not_installed_names_its_extra(bare_host, monkeypatch):
    monkeypatch.setitem(
        backend_catalog.BACKEND_CATALOG,
        "e2b",
        BackendInfo(
            "x", sdk="no_such_sdk_for_analyst_env", extra="e2b", variables=("E2B_API_KEY",)
        ),
    )
    ready = readiness("e2b")
    assert not ready.installed and not ready.usable
    assert ready.missing == ("pip install 'analyst-env[e2b]'", "set E2B_API_KEY")


def test_the_command_prints_one_entry_per_backend_and_how_to_use_one(bare_host):
    done = subprocess.run(
        [sys.executable, "-m", "analyst_env.cli", "backends"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for name in BACKENDS:
        assert any(line.startswith(name + " ") for line in out.splitlines()), (name, out)
    assert "needs: set E2B_API_KEY" in out
    assert "ANALYST_ENV_BACKEND=NAME analyst-env serve" in out
