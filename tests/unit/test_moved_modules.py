"""Scripts that import the harness and the adapters by their old names keep working.

``analyst_env.client.evaluation.*`` and ``analyst_env.client.trainers.*`` moved to
``analyst_env.evaluation``, ``analyst_env.trainers``, ``analyst_env.run_records`` and
``analyst_env.prompts``; ``analyst_env.client.local_server`` (a server in a thread) to
``analyst_env.server.local_server``. Each old name gives the moved module itself (one
implementation, one set of classes) and a DeprecationWarning that names the new path.
Checked in a fresh interpreter: this process has imported the new modules already.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

MOVED = {
    **{
        f"analyst_env.client.trainers.{name}": f"analyst_env.trainers.{name}"
        for name in ("harbor_export", "tool_calls", "trajectory_export", "trl")
    },
    "analyst_env.client.trainers.prompts": "analyst_env.prompts",
    **{
        f"analyst_env.client.evaluation.{name}": f"analyst_env.evaluation.{name}"
        for name in (
            "agent_loop",
            "chat_client",
            "engine",
            "gold_leaks",
            "html_report",
            "policies",
            "run",
            "validation",
        )
    },
    "analyst_env.client.evaluation.run_log": "analyst_env.run_records.run_log",
    "analyst_env.client.evaluation.report": "analyst_env.run_records.report",
    "analyst_env.client.local_server": "analyst_env.server.local_server",
}

PROBE = """
import importlib, json, sys, warnings
out = {}
for old, new in json.loads(sys.argv[1]).items():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = importlib.import_module(old)
    out[old] = {
        "same": module is importlib.import_module(new),
        "warnings": [
            (w.category.__name__, str(w.message)) for w in caught if new in str(w.message)
        ],
    }
print(json.dumps(out))
"""


def _probe(moved: dict[str, str]) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(moved)],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_every_old_name_is_the_moved_module_with_a_warning_naming_it():
    found = _probe(MOVED)
    for old, new in MOVED.items():
        assert found[old]["same"], old
        assert found[old]["warnings"] == [
            ["DeprecationWarning", f"{old} moved to {new}; import {new} instead"]
        ]


def test_old_name_of_the_skyrl_adapter():
    pytest.importorskip("skyrl_gym", reason="the SkyRL adapter needs the 'skyrl' extra")
    old, new = "analyst_env.client.trainers.skyrl", "analyst_env.trainers.skyrl"
    assert _probe({old: new})[old]["same"]


def test_every_old_module_is_listed():
    """A module added to the old folders without an entry here would go untested."""
    listed = {name.rsplit(".", 1)[1] for name in MOVED} - {"local_server"} | {"skyrl"}
    on_disk = {
        p.stem
        for folder in ("client/trainers", "client/evaluation")
        for p in (REPO / folder).glob("*.py")
        if p.stem != "__init__"
    }
    assert on_disk == listed


def test_from_import_of_an_old_name_still_gives_its_functions():
    code = (
        "import warnings; warnings.simplefilter('error', DeprecationWarning)\n"
        "try:\n"
        "    from analyst_env.client.evaluation.report import build_report\n"
        "except DeprecationWarning as e:\n"
        "    print('warned:', e)\n"
        "warnings.simplefilter('ignore', DeprecationWarning)\n"
        "from analyst_env.client.evaluation.report import build_report\n"
        "from analyst_env.run_records.report import build_report as new\n"
        "print(build_report is new)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "warned: analyst_env.client.evaluation.report moved to analyst_env.run_records.report; "
        "import analyst_env.run_records.report instead",
        "True",
    ]
