"""Export a dataset as Harbor task directories, graded by the server's own scorer.

Harbor (and TRL's ``HarborSpec``, SkyRL's ``HarborGenerator``, verifiers'
``HarborTaskset``) run tasks in sandboxes instead of talking to our server.
``analyst-env export harbor --dataset D --out DIR`` writes ``DIR/tasks/<id>/``:

- ``instruction.md``: the question, where the data is (``/home/user/input``) and
  the submission rule (write the answer to ``/workdir/answer.txt``), TRL's
  data-agent conventions, so ``HarborSpec(DIR, agent="bash")`` works unchanged;
- ``task.toml``: name, metadata (``gold_answer``, ``difficulty_level``, ``source``), timeouts,
  resources;
- ``environment/Dockerfile`` and ``environment/data/``: the task's files copied to
  ``/home/user/input``, setup hooks run there, and the grader's public
  dependencies installed; **not** the grader itself and nothing of ``tests/``.
  The Dockerfile builds ``FROM python:3.11-slim`` or the ``--base-image`` given,
  and refers to nothing outside its build context: with ``--wheelhouse DIR`` the
  wheels are copied into ``environment/wheels/`` and installed from there only;
- ``tests/test.sh``, ``tests/task.json`` and ``tests/grader/``: Harbor copies
  ``tests/`` into the container only when verification starts, so the agent can
  neither read the gold nor patch the grader. ``test.sh`` installs the grader
  from ``tests/grader/`` (the wheel built from the running package, or the
  local wheel given as ``--grader-requirement``; any other requirement is
  pip-installed at verification time), runs ``analyst_env.server.harbor_grader``
  with ``python -I``
  (the working directory and ``PYTHONPATH`` cannot shadow the grader), i.e.
  the server's ``verify_answer`` on ``/workdir/answer.txt``, and always
  rewrites ``/logs/verifier/reward.txt``; reference workbooks of file-scored
  tasks (``workbook_match``) are copied into ``tests/`` too;
- ``solution/solve.sh``: replays the oracle's tool calls and writes the oracle answer.

Every path in the scripts can be overridden by an environment variable
(``HARBOR_INPUT``, ``HARBOR_WORKDIR``, ``HARBOR_TESTS``, ``HARBOR_LOGS``,
``HARBOR_PYTHON``) so the grader can be run outside Docker; ``HARBOR_NO_INSTALL=1``
skips the grader installation when the Python given already has it.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
import tempfile
from importlib.metadata import PackageNotFoundError, requires
from pathlib import Path

from analyst_env.task_format import Task, answer_references

GRADER_REQUIREMENT = None
"""Default: a wheel built from the running package, bundled into every task's ``tests/grader/``."""

# E501: the shell script is written out byte for byte; its long lines stay whole.
_TEST_SH = """#!/bin/sh
# Grades /workdir/answer.txt with analyst_env's own scorer; always rewrites the reward file.
INPUT="${HARBOR_INPUT:-/home/user/input}"
WORKDIR="${HARBOR_WORKDIR:-/workdir}"
TESTS="${HARBOR_TESTS:-/tests}"
LOGS="${HARBOR_LOGS:-/logs/verifier}"
PYTHON="${HARBOR_PYTHON:-python3}"
mkdir -p "$LOGS"
rm -f "$LOGS/reward.txt" "$LOGS/reward.json"
echo 0 > "$LOGS/reward.txt"
if [ "${HARBOR_NO_INSTALL:-0}" != 1 ]; then
    # The grader arrives with tests/, at verification time; reinstalled over anything the agent put there.
    set -- "$TESTS"/grader/*.whl
    if [ -f "$1" ]; then
        "$PYTHON" -I -m pip install --quiet --no-index --no-deps --force-reinstall "$@" || exit 0
    elif [ -f "$TESTS/grader/requirement.txt" ]; then
        "$PYTHON" -I -m pip install --quiet --no-deps --force-reinstall -r "$TESTS/grader/requirement.txt" || exit 0
    fi
fi
"$PYTHON" -I -m analyst_env.server.harbor_grader --task "$TESTS/task.json" --input "$INPUT" \\
    --answer "$WORKDIR/answer.txt" --reward "$LOGS/reward.txt" || echo 0 > "$LOGS/reward.txt"
"""  # noqa: E501


def _solve_sh(task: Task) -> str:
    lines = [
        "#!/bin/sh",
        "# The oracle: replays the reference tool calls, then writes the known-good answer.",
        "set -e",
        'INPUT="${HARBOR_INPUT:-/home/user/input}"',
        'WORKDIR="${HARBOR_WORKDIR:-/workdir}"',
        'PYTHON="${HARBOR_PYTHON:-python3}"',
        'mkdir -p "$WORKDIR"',
        'cd "$INPUT"',
    ]
    code = [
        str(s.arguments.get("code", ""))
        for s in task.oracle_steps
        if s.tool in ("add_and_execute_code_cell", "edit_and_execute_current_cell")
    ]
    for step in task.oracle_steps:
        if step.tool == "execute_shell_command":
            lines.append(str(step.arguments.get("command", "")))
    if code:
        lines.append(
            "\"$PYTHON\" - <<'ANALYST_ENV_ORACLE'\n" + "\n".join(code) + "\nANALYST_ENV_ORACLE"
        )
    lines.append(f'printf %s {shlex.quote(task.oracle_answer)} > "$WORKDIR/answer.txt"')
    return "\n".join(lines) + "\n"


def grader_dependencies() -> list[str]:
    """The running package's own (non-extra) requirements: public packages the image may install."""
    try:
        found = requires("analyst-env") or []
    except PackageNotFoundError:
        return []
    return sorted(r for r in found if "extra ==" not in r and "extra==" not in r)


BASE_IMAGE = "python:3.11-slim"
"""The image every exported task builds FROM unless ``--base-image`` names another."""

ANALYST_PACKAGES = ["pandas", "numpy", "scikit-learn", "openpyxl", "duckdb", "matplotlib"]
"""What the agent is told is installed (``instruction.md``), besides the grader's dependencies."""


def _dockerfile(task: Task, base_image: str = BASE_IMAGE, wheelhouse: bool = False) -> str:
    """The task image: the base, the analysis packages and the grader's dependencies, the data.

    With a wheelhouse, pip installs only from ``environment/wheels/`` (copied in from the
    build context, ``--no-index``): the build needs no package index at all.
    """
    packages = " ".join(shlex.quote(r) for r in [*ANALYST_PACKAGES, *grader_dependencies()])
    if wheelhouse:
        install = [
            "COPY wheels/ /tmp/wheels/",
            (
                f"RUN pip install --no-cache-dir --no-index --find-links /tmp/wheels {packages} "
                "&& rm -rf /tmp/wheels"
            ),
        ]
    else:
        install = [f"RUN pip install --no-cache-dir {packages}"]
    lines = [
        f"FROM {base_image}",
        *install,
        "RUN mkdir -p /home/user/input /workdir /logs/verifier",
    ]
    if task.verifier.name == "workbook_match":
        # The grader recalculates formulas the agent wrote before comparing cell values.
        lines.insert(
            1,
            "RUN apt-get update && apt-get install -y --no-install-recommends "
            "libreoffice-calc-nogui "
            "&& rm -rf /var/lib/apt/lists/*",
        )
    if task.files:
        lines.append("COPY data/ /home/user/input/")
    for command in task.setup:
        lines.append(f"RUN cd /home/user/input && {command}")
    lines.append("WORKDIR /home/user/input")
    return "\n".join(lines) + "\n"


def _toml_value(value: object) -> str:
    return json.dumps(value if isinstance(value, (int, float, bool)) else str(value))


def _task_toml(task: Task, timeout_s: int) -> str:
    meta = {
        "task_id": task.id,
        "gold_answer": task.oracle_answer,
        "difficulty_level": task.metadata.get("level", "unknown"),
        "reward_mode_initial": "verifier",
        "source": task.metadata.get("source", "analyst_env"),
        "split": task.split,
    }
    instruction = task.instruction.strip()
    description = instruction.splitlines()[0] if instruction else task.id
    return "\n".join(
        [
            'schema_version = "1.1"',
            "",
            "[task]",
            f"name = {_toml_value('analyst-env/' + task.id)}",
            f"description = {_toml_value(description)}",
            "",
            "[metadata]",
            *(f"{k} = {_toml_value(v)}" for k, v in meta.items()),
            "",
            "[verifier]",
            "timeout_sec = 600",
            "",
            "[agent]",
            f"timeout_sec = {timeout_s}",
            "",
            "[environment]",
            "cpus = 1",
            "memory_mb = 4096",
            "storage_mb = 2048",
            "allow_internet = false",
            "",
        ]
    )


def _instruction(task: Task) -> str:
    from analyst_env.datasets import describe_file
    from analyst_env.prompts import describe_files

    files = [describe_file(name, path) for name, path in sorted(task.files.items())]
    text = task.instruction.strip()
    if files:
        text += (
            "\n\nThe data files are in `/home/user/input` (also the working directory):\n"
            + describe_files(files)
        )
    text += (
        "\n\nPython 3 with pandas, numpy, scikit-learn, duckdb, openpyxl and matplotlib is "
        "installed. When you are done, write only your final answer, in the format the question "
        "asks for, to `/workdir/answer.txt`."
    )
    return text + "\n"


def _bundleanswer_references(task: Task, tests: Path) -> Task:
    """Copy the task's reference files into ``tests`` and point the answer at them, relative to
    ``task.json``."""
    if not answer_references(task.answer):
        return task
    answer = json.loads(json.dumps(task.answer))
    for number, ref in enumerate(answer_references(answer), start=1):
        name = f"reference-{number}{Path(ref['path']).suffix}"
        shutil.copyfile(ref["path"], tests / name)
        ref["path"] = name
    return task.model_copy(update={"answer": answer})


def build_grader_wheel(outdir: Path) -> Path:
    """Build a wheel of the running ``analyst_env`` (its source tree must have ``pyproject.toml``).

    Raises:
        RuntimeError: If the package was not installed from a source tree, or the build fails.
    """
    import analyst_env

    root = Path(analyst_env.__file__).resolve().parent
    if not (root / "pyproject.toml").is_file():
        raise RuntimeError(
            f"cannot build the grader wheel: {root} has no pyproject.toml (not a source tree); "
            "pass --grader-requirement with a wheel path"
        )
    outdir.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(outdir),
            str(root),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    wheels = sorted(outdir.glob("analyst_env-*.whl"))
    if proc.returncode != 0 or not wheels:
        raise RuntimeError(
            f"building the grader wheel failed: {(proc.stderr or proc.stdout).strip()[-500:]}"
        )
    return wheels[-1]


def _bundle_grader(tests: Path, grader: str | Path) -> None:
    """Put the grader in ``tests/grader/``: the wheel file itself, or a requirement line for pip."""
    target = tests / "grader"
    target.mkdir()
    path = Path(grader)
    if path.suffix == ".whl" and path.is_file():
        shutil.copyfile(path, target / path.name)
    elif path.suffix == ".whl" or str(grader).startswith((".", "/")):
        raise FileNotFoundError(f"grader wheel {grader} does not exist")
    else:
        (target / "requirement.txt").write_text(f"{grader}\n")


def _bundle_wheelhouse(environment: Path, wheelhouse: str | Path) -> None:
    """Copy every wheel of ``wheelhouse`` into the build context (``environment/wheels/``)."""
    wheels = sorted(Path(wheelhouse).glob("*.whl"))
    if not wheels:
        raise FileNotFoundError(f"wheelhouse {wheelhouse} holds no *.whl files")
    (environment / "wheels").mkdir()
    for wheel in wheels:
        shutil.copyfile(wheel, environment / "wheels" / wheel.name)


def export_task(
    task: Task,
    out: Path,
    *,
    grader_requirement: str | Path,
    timeout_s: int = 1800,
    base_image: str = BASE_IMAGE,
    wheelhouse: str | Path | None = None,
) -> Path:
    """Write one Harbor task directory ``out/<task.id>``; returns it.

    Args:
        grader_requirement: A local wheel (copied into ``tests/grader/``) or a pip
            requirement (installed at verification time, which needs network).
        base_image: The image the task's Dockerfile builds FROM (a local tag where
            Docker Hub is out of reach, e.g. ``deploy/image/base.sh``'s).
        wheelhouse: A folder of wheels for the image's packages; copied into the
            build context and installed with ``--no-index`` (no package index needed).
    """
    root = out / task.id
    if root.exists():
        shutil.rmtree(root)
    for sub in ("environment/data", "tests", "solution"):
        (root / sub).mkdir(parents=True)
    for name, path in task.files.items():
        target = root / "environment" / "data" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    (root / "instruction.md").write_text(_instruction(task))
    (root / "task.toml").write_text(_task_toml(task, timeout_s))
    if wheelhouse is not None:
        _bundle_wheelhouse(root / "environment", wheelhouse)
    (root / "environment" / "Dockerfile").write_text(
        _dockerfile(task, base_image, wheelhouse is not None)
    )
    _bundle_grader(root / "tests", grader_requirement)
    (root / "tests" / "task.json").write_text(
        _bundleanswer_references(task, root / "tests").model_dump_json(indent=1)
    )
    for script, text in (
        (root / "tests" / "test.sh", _TEST_SH),
        (root / "solution" / "solve.sh", _solve_sh(task)),
    ):
        script.write_text(text)
        script.chmod(0o755)
    return root


def export(
    tasks: list[Task],
    out: str | Path,
    grader_requirement: str | Path | None = GRADER_REQUIREMENT,
    **options,
) -> list[Path]:
    """Write ``out/tasks/<id>/`` for every task; returns the task directories.

    Args:
        grader_requirement: A local wheel or pip requirement for the grader;
            ``None`` builds the wheel of the running package once and bundles it.
    """
    tasks_dir = Path(out) / "tasks"
    tasks_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="analyst-grader-") as tmp:
        grader = (
            grader_requirement if grader_requirement is not None else build_grader_wheel(Path(tmp))
        )
        return [
            export_task(task, tasks_dir, grader_requirement=grader, **options) for task in tasks
        ]
