"""Live: the OpenAPI schema says what the server answers, checked by schemathesis.

A real ``analyst-env serve`` with a token; schemathesis (its CLI, as a user runs it)
reads ``/openapi.json`` and sends schema-generated requests, valid and invalid, to every
operation but the two that start builds (``POST /envs``, ``POST /envs/{name}/build``:
each would install packages). It must find no server error, no status the schema does
not list, no response that breaks its documented schema, and no invalid reset body
accepted. Known gaps it would report, and so not checked: the ``Allow``
header of a 405 on a path whose methods are separate routes (Starlette lists the first
route's), and OpenEnv's stateless HTTP ``/step``, which answers an action schemathesis
calls invalid with an error observation (no episode runs there) rather than a 4xx.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from server.serve_process import ServeProcess

pytestmark = [pytest.mark.live, pytest.mark.timeout(600)]
TOKEN = "openapi-token"
CHECKS = ",".join(
    [
        "not_a_server_error",
        "status_code_conformance",
        "content_type_conformance",
        "response_schema_conformance",
    ]
)
BUILDS = r"^/envs$|/build$"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with ServeProcess(tmp_path_factory.mktemp("openapi"), env={"ANALYST_ENV_TOKEN": TOKEN}) as s:
        yield s


def schemathesis(*args: str) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("schemathesis")
    assert exe.exists() or shutil.which("schemathesis"), "pip install -e '.[dev]'"
    return subprocess.run(
        [str(exe), "run", *args], capture_output=True, text=True, timeout=540, check=False
    )


def test_the_schema_lists_errors_options_and_the_action(server):
    schema = httpx.get(
        f"{server.url}/openapi.json", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30
    ).json()
    paths = schema["paths"]
    assert {"401", "404", "422"} <= set(paths["/envs/{name}"]["get"]["responses"])
    assert {"400", "401", "404", "409", "422", "503"} <= set(paths["/reset"]["post"]["responses"])
    assert "401" not in paths["/health"]["get"]["responses"], "/health needs no token"
    body = schema["components"]["schemas"]["ResetBody"]
    assert body["additionalProperties"] is False
    assert {"seed", "task_id", "split", "index", "environment", "options"} <= set(
        body["properties"]
    )
    step = schema["components"]["schemas"]["StepRequest"]["properties"]["action"]
    assert step["$ref"] == "#/components/schemas/CallToolAction"
    assert "tool_name" in schema["components"]["schemas"]["CallToolAction"]["required"]


def test_schemathesis_finds_no_undocumented_answer(server):
    done = schemathesis(
        f"{server.url}/openapi.json",
        "-H",
        f"Authorization: Bearer {TOKEN}",
        "--checks",
        CHECKS,
        "--max-examples",
        "25",
        "--seed",
        "1",
        "--exclude-path-regex",
        BUILDS,
    )
    assert done.returncode == 0, done.stdout[-6000:]


def test_schemathesis_finds_no_invalid_reset_body_accepted(server):
    """Every body the reset schema calls invalid (a wrong type, an unknown option, a
    negative index, a boolean seed) is refused. Valid bodies may still be refused for what
    a schema cannot say (``task_id`` with ``split``, an option given twice with different
    values), so their acceptance is not checked."""
    done = schemathesis(
        f"{server.url}/openapi.json",
        "-H",
        f"Authorization: Bearer {TOKEN}",
        "--checks",
        "negative_data_rejection,not_a_server_error",
        "--max-examples",
        "40",
        "--seed",
        "1",
        "--include-path",
        "/reset",
        "--phases",
        "examples,coverage,fuzzing",
    )
    assert done.returncode == 0, done.stdout[-6000:]
